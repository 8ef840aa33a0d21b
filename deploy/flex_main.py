"""The Flex Template's main file (FLEX_TEMPLATE_PYTHON_PY_FILE in deploy/Dockerfile).

The launcher runs it with the template's parameters as flags. It only builds
and submits the job: a scheduled refresh when output_root is given (keep_versions:
how many versions it keeps), else a one-off run into output_dir; publishing, and
for a refresh LATEST and retention, are part of the job (pipeline/dataflow.py,
pipeline/refresh.py).
"""

from bert_pretraining_data.pipeline.refresh import main, template_main

if __name__ == "__main__":
    main(entry=template_main)
