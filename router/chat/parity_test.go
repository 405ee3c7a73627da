package chat

import (
	"errors"
	"slices"
	"testing"
)

// parityBodies is the number of generated bodies per model family.
const parityBodies = 320

// TestParityWithReferences renders generated request bodies for Qwen3,
// Llama 3 and DeepSeek V3 and requires (1) the same text as the Python
// reference (Debian's python3-jinja2 with the Hugging Face environment), or
// a refusal where it refuses, and (2) end-to-end ids identical to the JS
// tokenizer's ids for the reference text.
func TestParityWithReferences(t *testing.T) {
	for _, family := range []string{"qwen3", "llama3", "deepseek_v3"} {
		t.Run(family, func(t *testing.T) {
			m, files := loadFamily(t, family, Options{})
			g := newBodyGen(uint64(len(family)))
			bodies := make([][]byte, parityBodies)
			for i := range bodies {
				bodies[i] = g.body()
			}
			ref := pythonRender(t, files.TokenizerConfig, false, bodies)
			var texts []string
			var ids [][]uint32
			var rendered, refused int
			for i, b := range bodies {
				got, err := m.RenderChat(b)
				want := ref[i]
				switch {
				case want.Text == nil && err == nil:
					t.Errorf("body %d: reference refused (%s%s), we rendered %q\nbody %s", i, want.Error, want.Untokenizable, clip(got), b)
				case want.Text == nil:
					refused++
					if (want.Untokenizable != "") != errors.Is(err, ErrUntokenizable) {
						t.Errorf("body %d: reference %q/%q, we %v", i, want.Error, want.Untokenizable, err)
					}
				case err != nil:
					t.Errorf("body %d: %v\nbody %s", i, err, b)
				case got != *want.Text:
					t.Errorf("body %d:\n got %q\nwant %q\nbody %s", i, clip(got), clip(*want.Text), b)
				default:
					rendered++
					req, err := ParseRequest(PathChatCompletions, b)
					if err != nil {
						t.Fatal(err)
					}
					p, err := m.Tokenize(req)
					if err != nil {
						t.Fatalf("body %d: tokenize: %v", i, err)
					}
					texts = append(texts, got)
					ids = append(ids, p[0])
				}
			}
			want := jsEncode(t, family, texts)
			bad := 0
			for i := range texts {
				if !slices.Equal(ids[i], want[i]) {
					if bad++; bad <= 3 {
						t.Errorf("ids of %q:\n got %v\nwant %v", clip(texts[i]), ids[i], want[i])
					}
				}
			}
			t.Logf("%s: %d bodies rendered identically (%d with identical ids), %d refused by both", family, rendered, len(texts)-bad, refused)
			if rendered < parityBodies/2 {
				t.Errorf("only %d of %d bodies rendered: the generator no longer exercises the template", rendered, parityBodies)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + " ... " + s[len(s)-300:]
	}
	return s
}
