package upload

// StateAborting is the record state of an abort that has begun, for the
// tests that set up an abort stopped half-way.
const StateAborting = stateAborting
