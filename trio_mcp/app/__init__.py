"""The user API: Server and its decorators, tools, resources, prompts, completion,
content, the handler's Context, and the dispatcher; it reaches the runtime only through
base._ports."""
