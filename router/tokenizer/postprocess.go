package tokenizer

import (
	"encoding/json"
	"fmt"
)

// template is the single-sequence part of a TemplateProcessing
// post-processor: the ids to put before and after the encoded text when
// special tokens are requested (Llama 3 puts <|begin_of_text|> before it).
// ByteLevel post-processors only adjust offsets, so they leave no trace here.
type template struct {
	prefix, suffix []uint32
}

func buildPostProcessor(raw json.RawMessage) (template, error) {
	var t template
	if isNull(raw) {
		return t, nil
	}
	var spec componentSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return t, fmt.Errorf("decoding post_processor: %w", err)
	}
	switch spec.Type {
	case "ByteLevel":
		return t, nil
	case "Sequence":
		for i, item := range spec.Processors {
			sub, err := buildPostProcessor(item)
			if err != nil {
				return t, fmt.Errorf("post_processor Sequence[%d]: %w", i, err)
			}
			t.prefix = append(sub.prefix, t.prefix...)
			t.suffix = append(t.suffix, sub.suffix...)
		}
		return t, nil
	case "TemplateProcessing":
		return buildTemplate(spec)
	}
	return t, unsupported("post_processor", spec.Type)
}

func buildTemplate(spec componentSpec) (template, error) {
	var t template
	seen := false
	for i, piece := range spec.Single {
		switch {
		case piece.Sequence != nil && piece.Sequence.ID == "A" && !seen:
			seen = true
		case piece.SpecialToken != nil:
			st, ok := spec.SpecialTokens[piece.SpecialToken.ID]
			if !ok {
				return t, fmt.Errorf("TemplateProcessing single[%d]: special token %q not in special_tokens", i, piece.SpecialToken.ID)
			}
			if seen {
				t.suffix = append(t.suffix, st.IDs...)
			} else {
				t.prefix = append(t.prefix, st.IDs...)
			}
		default:
			return t, fmt.Errorf("TemplateProcessing single[%d]: want one $A sequence and special tokens", i)
		}
	}
	if !seen {
		return t, fmt.Errorf("TemplateProcessing single template has no $A sequence")
	}
	return t, nil
}
