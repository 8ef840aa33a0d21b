"""The d2l recipe: d2l.ai's WikiText-2 BERT dataset, built on Beam."""
