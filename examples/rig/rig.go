// Package rig is a user's own test rig, a module of its own: it starts
// evalflow's interception server in front of a model of its choosing, as a
// program outside the evalflow module does, through the public packages
// only (interception, providers, dialects, trace).
package rig

import (
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
)

// Start serves an interception server relaying to the OpenAI-compatible
// API at baseURL and registers one rollout on it: the caller points its
// client at the returned server's LocalURL with the secret.
func Start(baseURL, apiKey, rolloutKey, model string) (srv *interception.Server, secret string, err error) {
	srv, err = interception.Listen(interception.Config{Upstream: providers.NewOpenAI(baseURL, apiKey)})
	if err != nil {
		return nil, "", err
	}
	secret, err = srv.Register(interception.Rollout{Key: rolloutKey, Model: model})
	if err != nil {
		srv.Close()
		return nil, "", err
	}
	return srv, secret, nil
}
