"""Reading corpora: text files, JSONL and Parquet tables, Wikipedia dumps, as (doc_key, [lines]) documents."""
