package agent

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/evalflow/evalflow/arith"
)

// calculatorDescription and calculatorParameters define the one tool this
// agent offers, in every dialect.
const calculatorDescription = "Evaluate an arithmetic expression with + - * / and parentheses."

var calculatorParameters = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"expression": map[string]any{"type": "string", "description": "for example 37 * (12 + 5)"},
	},
	"required": []string{"expression"},
}

// calculatorTool is the calculator as a chat completions tool.
var calculatorTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "calculator",
	Description: openai.String(calculatorDescription),
	Parameters:  calculatorParameters,
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
