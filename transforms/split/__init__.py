"""Held-out splits: which documents are held out, and the guard that keeps their near copies out of training."""
