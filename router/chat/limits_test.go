package chat

import (
	"errors"
	"strings"
	"testing"
)

// TestRequestLimits sends bodies that break each bound and checks the
// refusal names the bound: the 2 MB body of nested brackets once killed the
// router with a fatal stack overflow.
func TestRequestLimits(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{TrustRequestTemplate: true})
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	cases := []struct {
		name, path, body, limit string
	}{
		{"2 MB of nested brackets", PathChatCompletions, strings.Repeat("[", 2<<20), "MaxJSONDepth"},
		{"nested objects", PathCompletions, strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1), "MaxJSONDepth"},
		{"nested tool arguments", PathChatCompletions, `{"messages":[{"role":"user","content":"hi"}],"x":` +
			strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + `}`, "MaxJSONDepth"},
		{"too many values", PathCompletions, `{"prompt":[` + many(MaxJSONValues, "0") + `]}`, "MaxJSONValues"},
		{"too many messages", PathChatCompletions, `{"messages":[` + many(MaxMessages+1, `{"role":"user","content":"a"}`) + `]}`, "MaxMessages"},
		{"too many content parts", PathChatCompletions, `{"messages":[{"role":"user","content":[` +
			many(MaxContentParts+1, `{"type":"text","text":"a"}`) + `]}]}`, "MaxContentParts"},
		{"too many prompts", PathCompletions, `{"prompt":[` + many(MaxPrompts+1, `"a"`) + `]}`, "MaxPrompts"},
		{"too many token ids", PathCompletions, `{"prompt":[` + many(MaxPromptTokens+1, "7") + `]}`, "MaxPromptTokens"},
		{"too many token ids in a batch", PathCompletions, `{"prompt":[[1],[` + many(MaxPromptTokens+1, "7") + `]]}`, "MaxPromptTokens"},
		{"nested template", PathChatCompletions, chatWithTemplate("{{ " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200) + " }}"), "MaxTemplateDepth"},
		{"chained template", PathChatCompletions, chatWithTemplate("{{ 1" + strings.Repeat("+1", 200) + " }}"), "MaxTemplateDepth"},
		{"filter chain", PathChatCompletions, chatWithTemplate("{{ 'a'" + strings.Repeat("|lower", 200) + " }}"), "MaxTemplateDepth"},
		{"nested ifs", PathChatCompletions, chatWithTemplate(strings.Repeat("{% if 1 %}", 200) + strings.Repeat("{% endif %}", 200)), "MaxTemplateDepth"},
		{"huge repeat", PathChatCompletions, chatWithTemplate("{{ 'ab' * 1000000000000000000 }}"), "MaxRenderBytes"},
		{"doubling", PathChatCompletions, chatWithTemplate("{% set ns = namespace(s='abcdefgh') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "MaxRenderBytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := parseAndTokenize(m, c.path, c.body)
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != c.limit || !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("got %v, want a LimitError for %s", err, c.limit)
			}
			if !strings.Contains(err.Error(), c.limit) {
				t.Errorf("error %q does not name %s", err, c.limit)
			}
		})
	}
}

// TestWithinLimits checks bodies at each bound still go through.
func TestWithinLimits(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{})
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for name, c := range map[string]struct{ path, body string }{
		"depth at the limit":     {PathCompletions, `{"prompt":"a","x":` + strings.Repeat("[", MaxJSONDepth-1) + strings.Repeat("]", MaxJSONDepth-1) + `}`},
		"messages at the limit":  {PathChatCompletions, `{"messages":[` + many(MaxMessages, `{"role":"user","content":"a"}`) + `]}`},
		"token ids at the limit": {PathCompletions, `{"prompt":[` + many(MaxPromptTokens, "7") + `]}`},
	} {
		if err := parseAndTokenize(m, c.path, c.body); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func parseAndTokenize(m *Model, path, body string) error {
	req, err := ParseRequest(path, []byte(body))
	if err != nil {
		return err
	}
	_, err = m.Tokenize(req)
	return err
}

func chatWithTemplate(src string) string {
	b := pyDumps(src, false)
	return `{"messages":[{"role":"user","content":"hi"}],"chat_template":` + b + `}`
}

// TestTooLongToTokenize: prompt text past MaxTokenizeBytes routes on load
// alone (the engine may accept it) instead of costing the BPE seconds.
func TestTooLongToTokenize(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{})
	long := strings.Repeat("a", MaxTokenizeBytes+1)
	half := strings.Repeat("a", MaxTokenizeBytes/2+1)
	for name, c := range map[string]struct{ path, body string }{
		"completion":    {PathCompletions, `{"prompt":"` + long + `"}`},
		"batch in all":  {PathCompletions, `{"prompt":["` + half + `","` + half + `"]}`},
		"rendered chat": {PathChatCompletions, `{"messages":[{"role":"user","content":"` + long + `"}]}`},
	} {
		err := parseAndTokenize(m, c.path, c.body)
		var ue *UntokenizableError
		if !errors.As(err, &ue) || ue.Reason != "prompt_too_long" {
			t.Errorf("%s: %v, want untokenizable prompt_too_long", name, err)
		}
	}
}
