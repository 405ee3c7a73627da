package kvevents

// Form selects one of the two msgpack encodings vLLM has used for event
// batches. A fleet in the middle of an upgrade sends both, so the decoder
// accepts either without being told; the encoder needs to be told.
type Form uint8

const (
	// FormMap is the encoding of vLLM ~v0.26 on: the batch and each event are
	// maps, the event's tag under "type", fields at their default omitted.
	FormMap Form = iota
	// FormArray is the legacy array_like encoding: the batch is
	// [ts, events(, dp_rank)] and each event an array with its tag first and
	// trailing default fields omitted.
	FormArray
)

// String names the form as the simulator's flag spells it.
func (f Form) String() string {
	if f == FormArray {
		return "array"
	}
	return "map"
}

// Kind is an event's tag.
type Kind uint8

const (
	// KindUnknown is a tag this decoder does not know. Such events decode
	// without error (a newer vLLM may add kinds) and the applier skips them.
	KindUnknown Kind = iota
	// BlockStored reports full blocks newly cached on a tier.
	BlockStored
	// BlockRemoved reports blocks evicted from a tier.
	BlockRemoved
	// AllBlocksCleared reports that the engine dropped its whole cache.
	AllBlocksCleared
)

var kindNames = [...]string{"unknown", "BlockStored", "BlockRemoved", "AllBlocksCleared"}

// String returns the tag as vLLM writes it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Batch is one published message: the events of one engine step.
type Batch struct {
	// TS is the engine's wall clock at publication, in seconds since the epoch.
	TS float64
	// Events are in the order the engine produced them.
	Events []Event
	// DPRank is the data-parallel rank that produced the batch, valid when
	// HasDPRank (older vLLM sends two-element batches without it).
	DPRank    int
	HasDPRank bool
}

// Event is one KV-cache event of any kind; fields a kind does not carry stay
// at their zero value. Slices alias the decoded payload and the Batch's
// reused buffers: copy what must outlive the next DecodeBatch call.
type Event struct {
	Kind Kind
	// BlockHashes are the engine's hashes of full blocks, normalised to
	// uint64 (ints keep their two's-complement bits, digests their last
	// 8 bytes big-endian).
	BlockHashes []uint64
	// ParentHash is the engine hash of the block before the first one, valid
	// when HasParent; a chain's first block has none.
	ParentHash uint64
	HasParent  bool
	// TokenIDs are the tokens of all stored blocks, BlockSize per block; CPU
	// and storage tiers may send none.
	TokenIDs  []uint32
	BlockSize int
	// LoRAID is the adapter's integer id from older vLLM, valid when HasLoRAID.
	LoRAID    int64
	HasLoRAID bool
	// LoRAName names the adapter; empty for the base model.
	LoRAName string
	// Medium is the tier: "GPU" (also meant when empty), "CPU" or a storage
	// tier's name.
	Medium string
	// ExtraKeys holds, per block, the msgpack encoding of vLLM's extra-keys
	// tuple (LoRA name, multimodal hashes, cache salt, prompt-embeds hash), or
	// nil for a block without one. The slice is nil when the event has none.
	ExtraKeys [][]byte
	// GroupIdx is the KV-cache group of hybrid models (0 for plain ones).
	GroupIdx int
	// SpecKind and SlidingWindow describe the group's KV-cache spec when sent.
	SpecKind         string
	SlidingWindow    int
	HasSlidingWindow bool

	// UnknownFields counts the fields of the event this decoder does not
	// know (skipped, never fatal); UnknownField names the first, by map key
	// or as "element N" in the array form.
	UnknownFields int
	UnknownField  string

	// extraBuf keeps ExtraKeys' storage between decodes while ExtraKeys
	// itself stays nil for events without extra keys.
	extraBuf [][]byte
}

// noteUnknown records a field the decoder skipped for not knowing it.
func (e *Event) noteUnknown(name string) {
	if e.UnknownFields == 0 {
		e.UnknownField = name
	}
	e.UnknownFields++
}

// reset clears e for reuse while keeping its buffers.
func (e *Event) reset() {
	*e = Event{
		BlockHashes: e.BlockHashes[:0],
		TokenIDs:    e.TokenIDs[:0],
		extraBuf:    e.extraBuf[:0],
	}
}
