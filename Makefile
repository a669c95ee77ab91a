# The few commands everyone needs. Each bootstraps what it uses: a .venv with the pinned
# requirements, and Debian's redis-server / chromium (installed when root, else explained).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.requirements.stamp
DEV := $(VENV)/.requirements-dev.stamp
PYTEST_ARGS ?=
DEMO_ARGS := $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig "$(KUBECONFIG)") \
	$(if $(filter command line,$(origin CONTEXT)),--context "$(CONTEXT)")
BENCH_ARGS ?=
PLUGIN_DIR ?= $(HOME)/.local/bin
# Where `make kube-assets` writes the control-plane binaries (docs/real-control-plane.md).
KUBE_ASSETS ?= .run/k8s-assets

.PHONY: demo test bench screenshots lint fmt clean redis-server chromium kubectl prometheus kubectl-handoff etcd-server kube-assets

## make demo: the whole stack on this machine at http://127.0.0.1:8000/ (Ctrl-C stops it);
## make demo KUBECONFIG=~/.kube/config [CONTEXT=name] watches that cluster instead
## (only when given on the command line: a KUBECONFIG in the environment is not taken).
demo: $(RUNTIME) redis-server
	$(PY) manage.py demo $(DEMO_ARGS)

## make test: the whole test suite, browser tests included
test: $(DEV) redis-server chromium kubectl prometheus etcd-server
	$(PY) -m pytest $(PYTEST_ARGS)

## make bench: the benchmarks (docs/benchmarks.md), e.g. make bench BENCH_ARGS=--quick
bench: $(DEV) redis-server chromium
	$(PY) manage.py bench --json .run/bench/results.json --figures .run/bench $(BENCH_ARGS)

## make screenshots: retake the README's pictures (docs/img/) from the demo scenario
screenshots: $(DEV) redis-server chromium
	HANDOFF_UPDATE_SCREENSHOTS=1 $(PY) -m pytest -q tests/browser/test_readme_screenshots.py

## make kubectl-handoff: the kubectl plugin on PATH (a link in PLUGIN_DIR, ~/.local/bin)
kubectl-handoff: $(RUNTIME)
	@mkdir -p "$(PLUGIN_DIR)"
	ln -sf "$(CURDIR)/bin/kubectl-handoff" "$(PLUGIN_DIR)/kubectl-handoff"
	@case ":$$PATH:" in *":$(PLUGIN_DIR):"*) ;; \
	  *) echo "add $(PLUGIN_DIR) to PATH so that kubectl finds the plugin" >&2 ;; esac

## make lint: ruff (lint and format) and the import layering contracts
lint: $(DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

## make fmt: format and apply safe lint fixes
fmt: $(DEV)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## make kube-assets: kube-apiserver, kube-scheduler, kube-controller-manager v1.20.2 built from
## Debian's source package into $(KUBE_ASSETS) (about 10 minutes), for the k8s tests
kube-assets:
	devtools/kube-assets.sh $(KUBE_ASSETS)

clean:
	rm -rf $(VENV) .run tests/artifacts .pytest_cache .ruff_cache

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "Handoff needs Python 3.11 or newer; found $$($(PYTHON) --version 2>&1)" >&2; exit 1; }
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  rm -rf $(VENV); \
	  $(call apt_install,python3-venv) && $(PYTHON) -m venv $(VENV); }

$(RUNTIME): requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

$(DEV): requirements-dev.txt requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@ $(RUNTIME)

redis-server:
	@command -v redis-server >/dev/null || $(call apt_install,redis-server)

chromium:
	@test -x /usr/bin/chromium || $(call apt_install,chromium fonts-liberation)

kubectl:
	@command -v kubectl >/dev/null || $(call apt_install,kubernetes-client)

# promtool (rule checks and unit tests), prometheus and alertmanager (the alerting tests).
prometheus:
	@command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null || \
	  $(call apt_install,prometheus prometheus-alertmanager)

# etcd for the real control plane of the k8s tests (tests/k8s, docs/real-control-plane.md).
etcd-server:
	@command -v etcd >/dev/null || $(call apt_install,etcd-server)

# $(call apt_install,PACKAGES): as root, install Debian packages (apt-get update once per
# checkout, and again if the install fails on stale lists); otherwise say exactly what to
# install and fail.
define apt_install
{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
    echo "installing Debian packages: $(1)"; \
    if [ ! -e .run/apt-updated ]; then \
      apt-get update -qq && mkdir -p .run && touch .run/apt-updated; fi && \
    { $(APT_GET_INSTALL) $(1) || { apt-get update -qq && $(APT_GET_INSTALL) $(1); }; }; \
  else \
    echo "missing Debian packages: run 'sudo apt-get install -y $(1)', then rerun make" >&2; \
    exit 1; \
  fi; }
endef
APT_GET_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
