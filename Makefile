# blocklab set-up, demo and tests on a fresh Debian 12 machine (run as root).
#   make demo   installs everything, builds what the demo needs and runs it
#   make test   installs everything and runs ruff, mypy and pytest
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.blocklab-installed
# `make demo DEMO_ARGS="--rounds 2 --slices 2 --scale 1"`: the demo with other numbers
# (its rounds are interleaved slices of 5 s: --slices, not --duration, sets how many).
DEMO_ARGS ?=

# Debian packages: PostgreSQL build dependencies, file-system tools, Debian's
# PostgreSQL 15 binaries (a second code path for the probes), Chromium for report tests,
# fio for device profiles, sysbench for its workload driver, ccache for builds that share
# their objects (blocklab.postgres.compiler_cache: layout variants, patches).
# liblz4-dev, libzstd-dev and liburing-dev: every build is configured --with-lz4
# --with-zstd (wal_compression) and, from PostgreSQL 18, --with-liburing (io_method =
# io_uring).
APT_PACKAGES := bison flex gcc make pkg-config zlib1g-dev libicu-dev libreadline-dev \
	liblz4-dev libzstd-dev liburing-dev \
	dpkg-dev ca-certificates e2fsprogs xfsprogs btrfs-progs util-linux procps \
	python3-venv postgresql-15 postgresql-client-15 chromium sqlite3 fio sysbench ccache

# Workload drivers besides pgbench: sysbench comes from Debian (built with its pgsql
# driver); go-tpc (TPC-C-like, TPC-H-like) is built from tools/go-tpc, whose go.mod and
# go.sum pin v1.0.12 and every module it is built from, into .tools/bin. Not
# `go install github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.12`: that form asks the module
# proxy for go-tpc's version list (a deprecation check), which the proxy here refuses.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
TOOLS_BIN := $(CURDIR)/.tools/bin
GO_TPC_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/pingcap/go-tpc" {print $$3}' tools/go-tpc/go.mod)

# What `make demo` needs, and no more (the demo builds PostgreSQL and runs pgbench on `dir`
# storage): on a fresh machine Chromium, PostgreSQL 15, fio, sysbench, the file-system tools
# and go-tpc are minutes of set-up the demo never uses; `make test` installs them.
DEMO_APT_PACKAGES := bison flex gcc make pkg-config zlib1g-dev libicu-dev libreadline-dev \
	liblz4-dev libzstd-dev liburing-dev dpkg-dev ca-certificates util-linux procps python3-venv

.PHONY: setup apt apt-demo apt-missing venv tools demo test check lint typecheck pytest clean-state

setup: apt venv tools

# The packages dpkg does not list as installed: asked of dpkg every time, not of a stamp
# file that a copied or stale /var/lib/blocklab could hold.
MISSING_PACKAGES = comm -23 <(printf '%s\n' $(1) | sort -u) \
	<(dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' $(1) 2>/dev/null \
	  | awk '$$1 == "ii" {print $$2}' | sort -u)

apt-missing:
	@$(call MISSING_PACKAGES,$(APT_PACKAGES))

apt: PACKAGES = $(APT_PACKAGES)
apt-demo: PACKAGES = $(DEMO_APT_PACKAGES)
apt apt-demo:
	@missing="$$($(call MISSING_PACKAGES,$(PACKAGES)))"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  mkdir -p /etc/postgresql-common/createcluster.d; \
	  : "Debian's postgresql-15 must not create or start a cluster of its own."; \
	  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/blocklab.conf; \
	  apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

# Skipped when .tools/bin/go-tpc already reports the pinned version.
tools:
	@if $(TOOLS_BIN)/go-tpc version 2>/dev/null | grep -qx 'Release version: $(GO_TPC_VERSION)'; \
	then :; else \
	  echo "building go-tpc $(GO_TPC_VERSION) into $(TOOLS_BIN)"; \
	  cd tools/go-tpc && GOBIN=$(TOOLS_BIN) GOTOOLCHAIN=local $(GO) install -trimpath \
	    -ldflags '-X main.version=$(GO_TPC_VERSION)' github.com/pingcap/go-tpc/cmd/go-tpc; \
	fi

venv: $(STAMP)
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@touch $@

demo: apt-demo venv
	$(VENV)/bin/blocklab run $(DEMO_ARGS)

lint: venv
	$(VENV)/bin/ruff check --no-cache blocklab tests bench
	$(VENV)/bin/ruff format --no-cache --check blocklab tests bench
	$(VENV)/bin/lint-imports --no-cache

typecheck: venv
	$(VENV)/bin/mypy

# Two workers take the tests in the order tests/conftest.py gives them: those that need a
# build first, by the time their builds are made in the background (tests/prebuild.py),
# longest first, then those that need none. --maxschedchunk 1: a worker is handed one test
# at a time (it holds two), so the build tests are shared as workers come free; --dist
# load's first hand-out gave the first worker a quarter of the session in one block, all
# the build tests with it. Not --dist loadgroup: with pytest 9.2 it ignores every
# xdist_group (pytest-xdist issue 1386), so a group is no promise. TEST_WORKERS=0: one
# process.
TEST_WORKERS ?= 2

pytest: setup
	$(VENV)/bin/pytest -ra --durations=25 -n $(TEST_WORKERS) --dist load --maxschedchunk 1 $(PYTEST_ARGS)

# The session's PostgreSQL builds start as soon as the packages and the venv are there,
# in the background of go-tpc's build, ruff, mypy and pytest (tests/prebuild.py).
test: apt venv
	$(PY) tests/prebuild.py $(MAKE) tools lint typecheck pytest

# The edit loop: lint, types, the import contract and the tests that need no PostgreSQL
# build, no root and no browser (a few minutes; `make test` runs everything).
check: venv lint typecheck
	$(VENV)/bin/pytest -q -m "not build and not root and not browser" $(PYTEST_ARGS)
