"""The operators' surface: a Flask app (HTTP API, server-rendered pages, /metrics)
served by waitress. See :func:`yarn_adapt.service.web.app.create_app`."""
