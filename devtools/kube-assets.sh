#!/usr/bin/env bash
# `make kube-assets`: kube-apiserver, kube-scheduler and kube-controller-manager v1.20.2,
# built from Debian 12's source package "kubernetes" (1.20.5+really1.20.2, full source with
# vendor/) with Debian's golang-1.19, static, linux/amd64. About 10 minutes and 6 GB of disk
# on 2 cores. Writes OUT/k8s-bin.tar.xz and OUT/SHA256SUMS (OUT: first argument, default
# .run/k8s-assets); then `export HANDOFF_K8S_ASSETS=OUT` and the k8s tests use them.
#
# The source comes through apt with a private deb-src list (the machine's apt configuration
# is left alone); the Go toolchain is installed with apt-get as root, else the exact command
# is printed. DRY_RUN=1 stops after checking that both can be had (apt-get --print-uris,
# apt-get --simulate) without downloading or building anything.
set -euo pipefail
out=$(mkdir -p "${1:-.run/k8s-assets}" && cd "${1:-.run/k8s-assets}" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}
toolchain=(golang-1.19-go golang-github-modern-go-reflect2-dev)
work=${WORK:-$(mktemp -d)}
echo "kube-assets: working in $work, output in $out"

# The source package, through a deb-src list of our own.
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb-src [signed-by=$keyring] $mirror $suite main" > "$work/apt/sources.list"
apt_src=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=-"
         -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
         -o "Debug::NoLocking=1")
apt-get "${apt_src[@]}" update -qq
if [[ ${DRY_RUN:-} == 1 ]]; then
  apt-get "${apt_src[@]}" source --print-uris kubernetes | grep -E "^'" | cut -d' ' -f2
  apt-get install --simulate "${toolchain[@]}" | grep -E '^(Inst|Conf)' | cut -d' ' -f1-3
  echo "kube-assets: dry run done (nothing downloaded or built)"
  exit 0
fi
if ! dpkg -s "${toolchain[@]}" >/dev/null 2>&1; then
  if [[ $(id -u) != 0 ]]; then
    echo "missing Debian packages: run 'sudo apt-get install -y ${toolchain[*]}', then rerun" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${toolchain[@]}"
fi
cd "$work" && apt-get "${apt_src[@]}" source --download-only kubernetes >/dev/null
tar xzf kubernetes_*.orig.tar.gz
src=$(tar tzf kubernetes_*.orig.tar.gz | sed -n '1s|/.*||p')  # kubernetes-1.20.2

# GOPATH mode, as the 1.20 tree expects.
export GOPATH=$work/gopath GO111MODULE=off GOFLAGS= CGO_ENABLED=0 PATH=/usr/lib/go-1.19/bin:$PATH
mkdir -p "$GOPATH/src/k8s.io" && ln -sfn "$work/$src" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"
# reflect2 1.0.1 crashes on Go >= 1.18 (map iteration); 1.0.2 is the fix, as Debian ships it.
rm -rf vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
# The one generated file the source package lacks: the OpenAPI definitions.
go build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
dirs=$( (find pkg cmd plugin -name '*.go' -not -name '*_test.go'
         find -L vendor/k8s.io -name '*.go' -not -name '*_test.go' \
           -not -path 'vendor/k8s.io/code-generator/*' -not -path 'vendor/k8s.io/sample-apiserver/*') |
       xargs grep -l '^// +k8s:openapi-gen=' | xargs -n1 dirname | LC_ALL=C sort -u |
       sed 's|^|k8s.io/kubernetes/|' | paste -sd,)
"$work/openapi-gen" -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
  -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$work/openapi-report.txt"
v=k8s.io/kubernetes/vendor/k8s.io
ld="-s -w -X $v/component-base/version.gitVersion=v1.20.2 -X $v/component-base/version.gitMajor=1"
ld+=" -X $v/component-base/version.gitMinor=20 -X $v/client-go/pkg/version.gitVersion=v1.20.2"
mkdir -p "$work/out"
components=(kube-apiserver kube-scheduler kube-controller-manager)
for c in "${components[@]}"; do
  go build -ldflags "$ld" -o "$work/out/$c" "./cmd/$c"
done
tar -cJf "$out/k8s-bin.tar.xz" -C "$work/out" "${components[@]}"
(cd "$work/out" && sha256sum "${components[@]}") > "$out/SHA256SUMS"
echo "kube-assets: built; now: export HANDOFF_K8S_ASSETS=$out"
