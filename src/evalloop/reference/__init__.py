"""Reference systems under test that ship with evalloop (the memory operations of the ADR)."""
