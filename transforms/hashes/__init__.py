"""Document hashes: what a corpus holds, 8 bytes a document, and how two versions differ."""
