"""`python -m pipeline`: the same entry point as the create-pretraining-data script."""

from pipeline.main import main

main()
