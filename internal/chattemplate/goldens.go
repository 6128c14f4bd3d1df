package chattemplate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Golden is a family's file in testdata/goldens: transformers' renders of
// testdata/conversations.json and its tokenizer's ids of some strings
// (testdata/render.py). The bridges' tests and the test upstream's are
// held to it.
type Golden struct {
	Family  string `json:"family"`
	Strings []struct {
		Text        string   `json:"text"`
		IDs         []int32  `json:"ids"`
		Tokens      []string `json:"tokens"`
		Decoded     string   `json:"decoded"`
		WithSpecial []int32  `json:"with_special"`
	} `json:"strings"`
	Renders []Render `json:"renders"`
	// Failed are the renders transformers refused (no Text and IDs).
	Failed []Render `json:"-"`
}

// Render is one render of a conversation's first K messages in a variant
// (the arguments as a string or an object, a null or empty content beside
// tool calls, the template's options), with the generation prompt or
// without.
type Render struct {
	Conversation string         `json:"conversation"`
	Args         string         `json:"args"`
	Content      string         `json:"content"`
	Kwargs       map[string]any `json:"kwargs"`
	K            int            `json:"k"`
	Gen          bool           `json:"add_generation_prompt"`
	Text         string         `json:"text"`
	IDs          []int32        `json:"ids"`
}

// Variant names the way r renders its conversation, all but K and Gen.
func (r Render) Variant() string {
	kw, _ := json.Marshal(r.Kwargs) // a map of JSON values encodes
	return fmt.Sprintf("%s args=%s content=%s %s", r.Conversation, r.Args, r.Content, kw)
}

func (r Render) String() string { return fmt.Sprintf("%s k=%d gen=%v", r.Variant(), r.K, r.Gen) }

// goldenFiles name each family's file in testdata/goldens.
var goldenFiles = map[string]string{Qwen3.Name: "qwen3.json", Llama31.Name: "llama3_1.json", DeepSeekV3.Name: "deepseek_v3.json"}

// ReadGolden reads f's golden file from dir, a testdata/goldens folder.
func ReadGolden(dir string, f Family) (Golden, error) {
	var g Golden
	b, err := os.ReadFile(filepath.Join(dir, goldenFiles[f.Name]))
	if err != nil {
		return g, err
	}
	var file struct {
		Golden
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		return g, fmt.Errorf("%s: %w", goldenFiles[f.Name], err)
	}
	g = file.Golden
	for _, e := range file.Errors {
		var r Render
		if json.Unmarshal(e, &r) == nil && r.Conversation != "" {
			g.Failed = append(g.Failed, r)
		}
	}
	return g, nil
}
