"""The quality stage: web-text rules (C4, Gopher, FineWeb) deciding each document before dedup."""
