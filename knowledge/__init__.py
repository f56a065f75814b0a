"""What pallasite knows: the error catalog, offline docs retrieval, and the results store."""
