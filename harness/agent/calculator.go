package agent

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/evalflow/evalflow/arith"
)

// calculatorTool is the one tool this agent offers.
var calculatorTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "calculator",
	Description: openai.String("Evaluate an arithmetic expression with + - * / and parentheses."),
	Parameters: openai.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"expression": map[string]any{"type": "string", "description": "for example 37 * (12 + 5)"},
		},
		"required": []string{"expression"},
	},
})

// runTool executes a tool call. Failures are results for the model to read,
// not errors of the agent.
func runTool(name, arguments string) string {
	if name != "calculator" {
		return fmt.Sprintf("error: unknown tool %q", name)
	}
	var args struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return fmt.Sprintf("error: arguments are not valid JSON: %v", err)
	}
	v, err := arith.Eval(args.Expression)
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	return arith.Format(v)
}
