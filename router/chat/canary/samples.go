package canary

import "github.com/llmd-dev/terraform-provider-llmd/router/chat"

// Sample is one canary request body for an endpoint path.
type Sample struct {
	Path string
	Body []byte
}

// DefaultSamples exercise what most often breaks parity: the system and
// multi-turn layout, tools serialised into the prompt, non-ASCII and
// markup characters, list-of-parts content, and a plain completion.
func DefaultSamples() []Sample {
	return []Sample{
		{chat.PathChatCompletions, []byte(`{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Héllo <&'> 日本"}]}`)},
		{chat.PathChatCompletions, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"first"},{"type":"text","text":"second"}]},{"role":"assistant","content":"ok"},{"role":"user","content":"again"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather <now> & 'later'","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`)},
		{chat.PathCompletions, []byte(`{"prompt":"The quick brown fox 🦊 jumps"}`)},
	}
}
