package sim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// chatMessage is one OpenAI chat message; content is a string or a list of
// parts of which the text parts are used.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (m *chatMessage) text() (string, error) {
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("message content is neither a string nor a list of parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// renderChatML is a PROVISIONAL stand-in for the model's chat template until
// the router's template package lands: Qwen's ChatML framing,
// "<|im_start|>role\ncontent<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when a generation prompt is wanted. It omits
// the default system prompt and tool rendering of Qwen2.5's real template.
func renderChatML(msgs []chatMessage, addGenerationPrompt bool) (string, error) {
	var b strings.Builder
	for i := range msgs {
		text, err := msgs[i].text()
		if err != nil {
			return "", fmt.Errorf("message %d: %w", i, err)
		}
		b.WriteString("<|im_start|>")
		b.WriteString(msgs[i].Role)
		b.WriteString("\n")
		b.WriteString(text)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}
