"""One module per format: what cannot be declarative (chunk semantics, readers, writers)."""
