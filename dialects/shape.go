package dialects

import (
	"reflect"

	"github.com/evalflow/evalflow/jsonshape"
)

// The request shapes the relay arm checks a body against before the
// upstream sees it (Overlay): what each ParseRequest would refuse, found in
// one pass without decoding. They are built from the very types the
// parsers decode into; the unions and hooks say what the parsers read from
// raw fields. FuzzRequestShape holds them to the parsers.
var (
	chatRequestShape = jsonshape.Of(reflect.TypeFor[chatRequest](),
		jsonshape.Union(reflect.TypeFor[chatMessage](), "content", reflect.TypeFor[string](), reflect.TypeFor[[]chatPart]()))

	responsesRequestShape = jsonshape.Of(reflect.TypeFor[responsesRequest](),
		jsonshape.Union(reflect.TypeFor[responsesRequest](), "input", reflect.TypeFor[string](), reflect.TypeFor[[]responsesItem]()),
		jsonshape.Hook(reflect.TypeFor[responsesItem](), checkResponsesItem))
	// responsesContentShape is what responsesContent reads.
	responsesContentShape = jsonshape.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]responsesText]()})

	anthropicRequestShape = jsonshape.Of(reflect.TypeFor[anthropicRequest](),
		jsonshape.Union(reflect.TypeFor[anthropicRequest](), "system", reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()),
		jsonshape.Hook(reflect.TypeFor[anthropicMessage](), checkAnthropicMessage))
	// anthropicBlocksShape is what anthropicBlocks reads.
	anthropicBlocksShape = jsonshape.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()})
	// anthropicUserBlocksShape is a user turn's content: its tool_result
	// blocks' content is read too.
	anthropicUserBlocksShape = jsonshape.OneOf([]reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]anthropicBlock]()},
		jsonshape.Hook(reflect.TypeFor[anthropicBlock](), func(o jsonshape.Object) error {
			if o.String("type") == "tool_result" {
				return o.Check("content", anthropicBlocksShape)
			}
			return nil
		}))
)

// checkResponsesItem checks the content responsesInput reads for an item
// of its type.
func checkResponsesItem(o jsonshape.Object) error {
	typ := o.String("type")
	if typ == "" && o.String("role") != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		return o.Check("content", responsesContentShape)
	case "function_call_output":
		return o.Check("output", responsesContentShape)
	case "reasoning":
		// The content is read only when the summary has no text.
		var summary []responsesText
		if raw := o.Raw("summary"); raw != nil {
			_ = unmarshal(raw, &summary) // its shape is checked already
		}
		for _, s := range summary {
			if s.Text != "" {
				return nil
			}
		}
		return o.Check("content", responsesContentShape)
	}
	return nil
}

// checkAnthropicMessage checks a message's content as ParseRequest reads
// it: blocks, and in a user turn the content of tool_result blocks too.
func checkAnthropicMessage(o jsonshape.Object) error {
	if o.String("role") == RoleAssistant {
		return o.Check("content", anthropicBlocksShape)
	}
	return o.Check("content", anthropicUserBlocksShape)
}
