#!/usr/bin/env bash
# Docker engine (Debian docker.io, dockerd started by hand) + local base image xcore-python:3.11.
# No registry is reachable: the image is built from this host's files (static busybox +
# Debian's /usr/bin/python3.11, its stdlib and shared libs, pip from python3-pip-whl).
# Idempotent: never starts a second dockerd; skips the build when the image exists.
source "$(dirname "$(readlink -f "$0")")/lib.sh"
infra_init docker "$@"

DOCKERD_LOG=/var/log/xcore-dockerd.log
RECIPE=1   # bump to force a rebuild of the base image on the next run

apt_install $PKGS_docker

docker_ok() { docker info >/dev/null 2>&1; }
if ! docker_ok; then
    if running dockerd; then
        log "dockerd runs already: waiting for it"
    else
        log "starting dockerd"
        setsid nohup /usr/sbin/dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
    fi
    wait_until 60 "docker info" docker_ok || die "dockerd does not answer (docker info)" "$DOCKERD_LOG"
fi

have_image() {
    [ "$(docker image inspect -f '{{ index .Config.Labels "org.xcore.infra.recipe" }}' "$DOCKER_IMAGE" 2>/dev/null)" = "$RECIPE" ]
}
if have_image; then
    log "ready: dockerd up, image $DOCKER_IMAGE present"
    exit 0
fi

log "building $DOCKER_IMAGE from host files"
R=$(mktemp -d /var/tmp/xcore-rootfs.XXXXXX)
BUILD_LOG=$INFRA_LOG/docker-image.log
: > "$BUILD_LOG"
trap 'rm -rf "$R" "${CTX:-}"' EXIT

# usr-merged skeleton like Debian 12
mkdir -p "$R"/usr/{bin,sbin,lib,lib64,local/bin,local/lib} "$R"/{etc,root,proc,sys,dev,run,home,var/tmp,tmp}
ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
chmod 1777 "$R/tmp" "$R/var/tmp"; chmod 700 "$R/root"

# static busybox for /bin/sh and the usual tools
BB=$(command -v busybox || echo /bin/busybox)
file_static() { ! ldd "$1" >/dev/null 2>&1; }
file_static "$BB" || die "busybox at $BB is not static (need Debian busybox-static)"
cp "$BB" "$R/usr/bin/busybox"
for a in $("$R/usr/bin/busybox" --list-full); do
    [ -e "$R/$a" ] || [ -L "$R/$a" ] || { mkdir -p "$(dirname "$R/$a")"; ln -s /usr/bin/busybox "$R/$a"; }
done

# Debian's python3.11 + stdlib (no test suite, no tk/idle)
cp /usr/bin/python3.11 "$R/usr/bin/python3.11"
ln -sf python3.11 "$R/usr/bin/python3"; ln -sf python3 "$R/usr/bin/python"
tar -C /usr/lib -c --exclude=python3.11/test --exclude=python3.11/idlelib --exclude=python3.11/tkinter \
    --exclude=python3.11/turtledemo --exclude=python3.11/lib2to3/tests --exclude=python3.11/EXTERNALLY-MANAGED \
    python3.11 | tar -C "$R/usr/lib" -x
mkdir -p "$R/etc/python3.11" "$R/usr/lib/python3/dist-packages" "$R/usr/local/lib/python3.11/dist-packages"
cp -a /etc/python3.11/. "$R/etc/python3.11/" 2>/dev/null || true
# shared libraries of the interpreter and its extension modules
{
    ldd /usr/bin/python3.11
    for so in /usr/lib/python3.11/lib-dynload/*.so; do ldd "$so"; done
} 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u > "$R/.libs"
while read -r lib; do
    mkdir -p "$(dirname "$R$lib")"
    cp -L "$lib" "$R$lib"
done < "$R/.libs"
rm -f "$R/.libs"
printf '/usr/lib/x86_64-linux-gnu\n/usr/local/lib\n' > "$R/etc/ld.so.conf"
ldconfig -r "$R" 2>>"$BUILD_LOG" || true

# pip (+ setuptools) from Debian's wheels: plain pure-python files, PEP 668 marker removed
for whl in /usr/share/python-wheels/pip-*.whl /usr/share/python-wheels/setuptools-*.whl; do
    python3.11 -m zipfile -e "$whl" "$R/usr/lib/python3/dist-packages/"
done
for n in pip pip3 pip3.11; do
    printf '#!/usr/bin/python3\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n' > "$R/usr/bin/$n"
    chmod 755 "$R/usr/bin/$n"
done

# minimal /etc
cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl-ca.crt" 2>/dev/null || die "no CA bundle on host"
mkdir -p "$R/etc/ssl/certs"; mv "$R/etc/ssl-ca.crt" "$R/etc/ssl/certs/ca-certificates.crt"
cat > "$R/etc/passwd" <<'X'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
X
printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$R/etc/nsswitch.conf"
: > "$R/etc/hosts"; : > "$R/etc/resolv.conf"; echo xcore > "$R/etc/hostname"
printf 'PRETTY_NAME="xcore-python 3.11 (busybox + Debian 12 python3.11)"\nID=xcore\n' > "$R/etc/os-release"

tar -C "$R" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_DISABLE_PIP_VERSION_CHECK=1' \
    --change 'ENV PIP_ROOT_USER_ACTION=ignore' \
    --change "LABEL org.xcore.infra.recipe=$RECIPE" \
    --change 'CMD ["python3"]' \
    - "$DOCKER_IMAGE" >>"$BUILD_LOG" 2>&1 || die "docker import failed" "$BUILD_LOG"

# Verify: interpreter, names, stdlib extension modules, pip, and a pip install during docker build.
check() {
    docker run --rm "$DOCKER_IMAGE" sh -c \
        'python --version && python3 -c "import ssl, sqlite3, ctypes, hashlib, json, lzma, bz2, zlib, decimal, venv, urllib.request; print(ssl.OPENSSL_VERSION)" && python3 -m pip --version' \
        >>"$BUILD_LOG" 2>&1
}
check || { docker rmi -f "$DOCKER_IMAGE" >/dev/null 2>&1; die "image $DOCKER_IMAGE is broken" "$BUILD_LOG"; }
CTX=$(mktemp -d)
printf 'FROM %s\nRUN python3 -m pip install --no-cache-dir six && python3 -c "import six; print(six.__version__)"\n' "$DOCKER_IMAGE" > "$CTX/Dockerfile"
pipcheck() { DOCKER_BUILDKIT=0 docker build -q -t xcore-infra-pipcheck "$CTX" >>"$BUILD_LOG" 2>&1; }
if ! pipcheck && ! { log "pip check failed, retrying once (PyPI hiccup?)"; sleep 3; pipcheck; }; then
    docker rmi -f "$DOCKER_IMAGE" >/dev/null 2>&1
    die "pip install inside 'docker build FROM $DOCKER_IMAGE' failed" "$BUILD_LOG"
fi
docker rmi -f xcore-infra-pipcheck >/dev/null 2>&1 || true
log "ready: dockerd up, image $DOCKER_IMAGE built ($(docker image inspect -f '{{.Size}}' "$DOCKER_IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
