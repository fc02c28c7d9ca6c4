#!/bin/sh
# The version every deployment and flow run carries: <package version>+<git sha>, e.g. 0.1.0+3f9c2a1b7d4e
# (the same string as oomrl.build_info.flow_version(); GIT_SHA stands in where there is no .git).
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
sha=$(git rev-parse --short=12 HEAD 2>/dev/null || echo "${GIT_SHA:-unknown}")
echo "${version}+${sha}"
