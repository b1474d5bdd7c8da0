// placeholder: filled in by the issue-6 work
