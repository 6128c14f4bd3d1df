package engine

import (
	"context"
	"net/http"
	"net/url"
)

// Network is what the engine says of a network.
type Network struct {
	ID     string `json:"Id"`
	Name   string
	Driver string
	IPAM   struct {
		Config []struct {
			Subnet  string
			Gateway string
		}
	}
}

// InspectNetwork reads a network by name or ID; a missing one is
// IsNotFound.
func (c *Client) InspectNetwork(ctx context.Context, name string) (Network, error) {
	var n Network
	err := c.call(ctx, http.MethodGet, "/networks/"+url.PathEscape(name), nil, nil, &n)
	return n, err
}

// CreateNetwork creates a bridge network of that name, its subnet chosen
// by the engine, with the labels given.
func (c *Client) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	in := map[string]any{"Name": name, "Driver": "bridge", "CheckDuplicate": true, "Labels": labels}
	return c.call(ctx, http.MethodPost, "/networks/create", nil, in, nil)
}
