"""Run the Ruby client scripts in tests/ruby against a real worker (Ruby from Debian's packages)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support.local import clean_env
from tests.support.localstack import REPO_ROOT
from tests.support.programs import need_program

RUBY_DIR = REPO_ROOT / "tests" / "ruby"
GEM_SOURCE = REPO_ROOT / "deploy" / "rails"


def need(program: str) -> str:
    return need_program(program, "ruby ruby-redis ruby-sidekiq")


def ruby(script: str, redis_url: str, **env: str) -> dict:
    """Run a Ruby script against `redis_url` (with extra environment `env`); it prints one JSON object."""
    out = subprocess.run(
        [need("ruby"), str(RUBY_DIR / script)],
        env=clean_env(REDIS_URL=redis_url, **env),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def build_gem(workdir: Path) -> Path:
    """`gem build` of deploy/rails/inference_tasks.gemspec, in a copy (the build writes the .gem beside it)."""
    source = workdir / "gem-source"
    shutil.copytree(GEM_SOURCE, source, ignore=shutil.ignore_patterns("test"))
    done = subprocess.run([need("gem"), "build", "inference_tasks.gemspec"], cwd=source, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = source.glob("inference_tasks-*.gem")
    return built


def install_gem(gem_file: Path, gem_home: Path) -> dict[str, str]:
    """Install the built gem offline into `gem_home` (its one dependency, redis, is Debian's), and
    return the environment under which Ruby finds it as an installed gem, as Bundler would."""
    done = subprocess.run(
        [need("gem"), "install", "--local", "--ignore-dependencies", "--no-document", "--install-dir", str(gem_home),
         str(gem_file)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    system_path = subprocess.run(
        [need("ruby"), "-e", 'puts Gem.path.join(":")'], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {"GEM_PATH": f"{gem_home}:{system_path}"}
