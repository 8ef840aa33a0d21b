"""`python -m bert_pretraining_data.pipeline`: the create-pretraining-data script."""

from bert_pretraining_data.pipeline.cli import create_pretraining_data

create_pretraining_data()
