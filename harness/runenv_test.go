package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRunEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // "" accepts
	}{
		{nil, ""},
		{[]string{"PYTHONUNBUFFERED=1", "HF_HUB_OFFLINE=1", "AGENT_FLAGS=a,b=c", "EMPTY="}, ""},
		{[]string{"MONKEY=banana", "KEYBOARD=us", "TOKENIZERS_PARALLELISM=false"}, ""},
		{[]string{"WANDB_API_KEY=x"}, "WANDB_API_KEY looks like a credential"},
		{[]string{"MY_KEY=x"}, "MY_KEY looks like a credential"},
		{[]string{"hf_token=x"}, "hf_token looks like a credential"},
		{[]string{"CLIENT_SECRET=x"}, "CLIENT_SECRET looks like a credential"},
		{[]string{"DB_PASSWORD_FILE=/p"}, "DB_PASSWORD_FILE looks like a credential"},
		{[]string{"TOKEN=x"}, "TOKEN looks like a credential"},
		{[]string{"NOEQUALS"}, `"NOEQUALS": want KEY=VALUE`},
		{[]string{"=v"}, "want KEY=VALUE"},
		{[]string{"A B=1"}, "no spaces"},
		{[]string{"OPENAI_BASE_URL=http://elsewhere"}, "OPENAI_BASE_URL: set by evalflow"},
		{[]string{"EVALFLOW_PROMPT=x"}, "EVALFLOW_PROMPT: set by evalflow"},
		{[]string{"A=1", "A=2"}, "A is given twice"},
	} {
		err := CheckRunEnv(tc.env)
		if tc.want == "" {
			assert.NoError(t, err, "CheckRunEnv(%q)", tc.env)
			continue
		}
		require.Error(t, err, "CheckRunEnv(%q)", tc.env)
		assert.Contains(t, err.Error(), tc.want, "CheckRunEnv(%q)", tc.env)
		if strings.Contains(tc.want, "credential") {
			assert.Contains(t, err.Error(), "credentials stay in the worker's environment")
			assert.NotContains(t, err.Error(), "=x", "the value is never repeated")
		}
	}
}

func TestSDKTimeoutEnv(t *testing.T) {
	assert.Nil(t, SDKTimeoutEnv(0))
	assert.Equal(t, []string{"OPENAI_TIMEOUT=91", "OPENAI_REQUEST_TIMEOUT=91", "HTTPX_TIMEOUT=91", "ANTHROPIC_TIMEOUT=91"},
		SDKTimeoutEnv(90*time.Second+time.Millisecond), "rounded up to whole seconds")
}
