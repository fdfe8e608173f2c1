# The agent's container: the repository as the task starts, in /app, and nothing of the grader's.
FROM python:3.12-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
${node}RUN useradd --create-home --shell /bin/bash agent
ADD workspace.tar.gz /app/
RUN chown -R agent:agent /app
WORKDIR /app
