"""Everything that renders output: the verdict's report (content, Markdown and HTML renderers, charts),
a PR's one report that both shells publish and the sinks that deliver it, JUnit XML,
github-action-benchmark JSON, and the reports of a release candidate, a bisection, the offload paths,
instruction counts and the triage's few words. Kept empty so importing one renderer loads no other."""
