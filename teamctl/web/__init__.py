"""`teamctl web`: the live web view of a root (CONTRACT §16).

Only `command` is imported by the CLI; it imports the server stack (Starlette, uvicorn:
the optional extra `teamd[web]`) when the command runs. The rest, one concern each:
`server` (binding, the printed URL, running uvicorn), `guard` (token, cookie, Host and
Origin, CSRF), `app` (routes), `documents` (the JSON the pages render, from the commands'
own library code), `conversation` (a member's session as items), `acts` (the actions,
through the commands' functions), `live` (what changed, from the same inotify wake-ups
`--watch` uses), `static/` (the HTML, CSS and JavaScript, served by the product).
"""
