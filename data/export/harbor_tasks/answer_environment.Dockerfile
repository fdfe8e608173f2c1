# The agent's container: an empty /app for its answer, and nothing of the grader's.
FROM python:3.12-slim-bookworm
RUN useradd --create-home --shell /bin/bash agent && mkdir /app && chown agent:agent /app
WORKDIR /app
