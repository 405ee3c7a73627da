package tokenizer

import "encoding/json"

// The structs below mirror the parts of Hugging Face's tokenizer.json that the
// byte-level BPE family uses. Components are kept as raw JSON until their
// "type" is known, so that an unknown component is reported by name instead of
// being dropped by the decoder.

type fileSpec struct {
	AddedTokens   []addedTokenSpec `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         json.RawMessage  `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
}

type addedTokenSpec struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelSpec struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]uint32 `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// componentSpec holds every field any supported normalizer, pre-tokenizer,
// post-processor or decoder reads; each builder checks the ones it needs.
type componentSpec struct {
	Type string `json:"type"`

	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`

	// Split
	Pattern  *patternSpec `json:"pattern"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`

	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`

	// TemplateProcessing
	Single        []templatePiece                 `json:"single"`
	SpecialTokens map[string]templateSpecialToken `json:"special_tokens"`
}

type patternSpec struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type templateSpecialToken struct {
	ID     string   `json:"id"`
	IDs    []uint32 `json:"ids"`
	Tokens []string `json:"tokens"`
}

// isNull reports whether a component is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}
