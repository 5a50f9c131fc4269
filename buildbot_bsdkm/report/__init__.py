"""Everything that renders output: the verdict's Markdown/HTML report and its blocks, JUnit XML,
github-action-benchmark JSON, and the reports of a release candidate, a bisection, the offload paths,
instruction counts and the triage's few words. Kept empty so importing one renderer loads no other."""
