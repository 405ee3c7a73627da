package chat

import "github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"

// detectFormat mirrors vLLM's _detect_content_format for
// --chat-template-content-format auto: a template that loops over a
// message's content ({% for part in message['content'] %}, directly or
// through a filter, test or slice) gets "openai" content, any other
// "string". Messages are followed through {% set %} aliases of messages and
// the targets of loops over them, as vLLM follows them.
func detectFormat(t *jinja.Template) contentFormat {
	if t.LoopsOverItemKey("messages", "content") {
		return formatOpenAI
	}
	return formatString
}
