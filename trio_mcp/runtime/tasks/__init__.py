"""The tasks extension: a tools/call that became a task, and the tasks of one runtime."""
