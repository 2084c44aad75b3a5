"""The Ruby client as a gem: `gem build` works, the installed gem loads on its own, and its minitest
suite (deploy/rails/test) passes against the real Redis and worker."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest

from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.ruby_runner import GEM_SOURCE, build_gem, need

READ_SPEC = """
require "rubygems/package"
spec = Gem::Package.new(ARGV[0]).spec
puts spec.name, spec.version.to_s, spec.runtime_dependencies.map(&:name).join(","), spec.files.join(",")
"""
WHERE_LOADED = 'require "inference_tasks"; puts $LOADED_FEATURES.grep(%r{/inference_tasks/client[.]rb}).first'
MINITEST_SUMMARY = re.compile(r"(\d+) runs, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips")


def test_the_gem_builds_with_the_projects_version_and_only_redis_as_dependency(tmp_path):
    gem_file = build_gem(tmp_path)
    spec = subprocess.run(
        [need("ruby"), "-e", READ_SPEC, str(gem_file)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert spec[:3] == ["inference_tasks", version, "redis"]
    assert {"lib/inference_tasks.rb", "lib/inference_tasks/client.rb", "lib/inference_tasks/wire.rb"} <= set(
        spec[3].split(",")
    )


def test_the_installed_gem_loads_by_name_without_the_checkout(installed_gem, tmp_path):
    loaded = subprocess.run(
        [need("ruby"), "-e", WHERE_LOADED],
        cwd=tmp_path,
        env=clean_env(**installed_gem),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded.startswith(installed_gem["GEM_PATH"].split(":")[0]), loaded
    assert not loaded.startswith(str(REPO_ROOT))


@pytest.mark.worker
@pytest.mark.timeout(600)
def test_the_gems_minitest_suite_passes_against_the_real_worker(inference_worker, trainer_worker):
    """Embed, classify, compact vectors, read-and-delete, TaskFailed, Timeout, QueueFull, a head
    trained from Ruby, and reply jobs in ActiveJob's and Sidekiq's formats, from the gem's own suite."""
    done = subprocess.run(
        [need("ruby"), "-Ilib", "-Itest", "-e", 'Dir["test/*_test.rb"].sort.each { |f| require File.expand_path(f) }'],
        cwd=GEM_SOURCE,
        env=clean_env(REDIS_URL=inference_worker.redis_url),
        capture_output=True,
        text=True,
        timeout=540,
    )
    output = done.stdout + done.stderr
    summary = MINITEST_SUMMARY.search(output)
    assert summary is not None, output
    runs, assertions, failures, errors, skips = map(int, summary.groups())
    assert (failures, errors, skips) == (0, 0, 0), output
    assert runs >= 14 and assertions >= 45, output  # every test in deploy/rails/test ran
    assert done.returncode == 0, output


SCREENED_BLANK = """
require "json"
require "inference_tasks/screen"
blank = (0..0x10FFFF).select do |code|
  next false if code.between?(0xD800, 0xDFFF)

  InferenceTasks::Screen.refusal([code].pack("U")) == "its text is empty or blank"
end
puts JSON.generate(blank)
"""


def test_the_gems_blank_is_the_workers_blank_for_every_code_point():
    """The gem screens a text as blank exactly when the worker would refuse it as blank (Python's str.strip(),
    i.e. str.isspace() for every character): a code point that differs would either fail a whole batch in the
    worker or be skipped by the backfill though the worker embeds it."""
    done = subprocess.run(
        [need("ruby"), "-I", str(GEM_SOURCE / "lib"), "-e", SCREENED_BLANK], capture_output=True, text=True, check=True
    )
    python_blank = [code for code in range(0x110000) if not (0xD800 <= code <= 0xDFFF) and not chr(code).strip()]
    assert json.loads(done.stdout) == python_blank
