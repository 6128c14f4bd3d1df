package mock

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/arith"
)

// calculator is the tool the mock calls when offered one.
const calculator = "calculator"

// fallbackReply is the answer to anything that is not arithmetic.
const fallbackReply = "I am the mock model. Ask me an arithmetic question."

// reply is what the model decided to answer.
type reply struct {
	content   string
	toolCalls []toolCall
	// status, when not 0 or 200, makes the response an error.
	status     int
	errMessage string
}

type toolCall struct {
	id, name, arguments string
}

func (r reply) finishReason() string {
	if len(r.toolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// reply decides the answer to req: a grade for a judge's prompt, the
// script's turn if the conversation is scripted, otherwise the built-in
// arithmetic behaviour.
func (m *Model) reply(req chatRequest) reply {
	h := conversationHash(req.Messages)
	if r, ok := grade(lastUserText(req.Messages)); ok {
		return r
	}
	if turn, ok := m.scripted(req.Messages); ok {
		return turn.reply(h)
	}
	lastUser := lastUserText(req.Messages)

	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		result := strings.TrimSpace(last.text())
		return reply{content: "The answer is " + m.maybeWrong(h, result) + "."}
	}
	expr, ok := arith.Find(lastUser)
	if !ok {
		return reply{content: fallbackReply}
	}
	if req.offers(calculator) {
		args, _ := json.Marshal(map[string]string{"expression": expr}) // a map of strings always encodes
		return reply{toolCalls: []toolCall{{id: callID(h, 0), name: calculator, arguments: string(args)}}}
	}
	v, err := arith.Eval(expr)
	if err != nil {
		return reply{content: fmt.Sprintf("I cannot compute %s: %v.", expr, err)}
	}
	return reply{content: "The answer is " + m.maybeWrong(h, arith.Format(v)) + "."}
}

// maybeWrong returns answer, or for the ErrorRate fraction of conversations
// an answer off by one.
func (m *Model) maybeWrong(h uint64, answer string) string {
	if m.cfg.ErrorRate == 0 || unit(h) >= m.cfg.ErrorRate {
		return answer
	}
	if v, err := strconv.ParseFloat(answer, 64); err == nil {
		return arith.Format(v + 1)
	}
	return "not " + answer
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 {
	return float64(h>>11) / (1 << 53)
}

func lastUserText(msgs []chatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].text()
		}
	}
	return ""
}

// conversationHash fingerprints the conversation so that every choice the
// mock makes (wrong answers, tool call ids) is a function of its input.
func conversationHash(msgs []chatMessage) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, m := range msgs {
		field(m.Role)
		field(m.text())
		field(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			field(tc.ID)
			field(tc.Function.Name)
			field(tc.Function.Arguments)
		}
	}
	return h.Sum64()
}

func callID(h uint64, k int) string {
	return fmt.Sprintf("call_%016x_%d", h, k)
}

// tokens estimates a token count from text length: ceil(chars/4).
func tokens(chars int) int {
	return (chars + 3) / 4
}

func (r reply) usage(req chatRequest) usage {
	in := 0
	for _, m := range req.Messages {
		in += len(m.text())
		for _, tc := range m.ToolCalls {
			in += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	out := len(r.content)
	for _, tc := range r.toolCalls {
		out += len(tc.name) + len(tc.arguments)
	}
	u := usage{PromptTokens: tokens(in), CompletionTokens: tokens(out)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}
