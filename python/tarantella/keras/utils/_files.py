"""keras.utils.get_file, offline: the file Keras would have downloaded, from Keras's cache folder
(cache_dir, else $KERAS_HOME, else ~/.keras; then cache_subdir). When it is absent, the error
names the address to fetch it from and the path to put it at."""
import hashlib
import os
import tarfile
import zipfile


def keras_cache_dir(base=None, cache_subdir="datasets"):
    base = base or os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(os.path.expanduser(base), cache_subdir)


def _hash(path, algorithm):
    h = hashlib.sha256() if algorithm == "sha256" else hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _extract(path, to, archive_format):
    formats = {"auto": ("tar", "zip"), "tar": ("tar",), "zip": ("zip",)}.get(archive_format or "auto")
    if formats is None:
        raise ValueError(f"get_file: archive_format must be 'auto', 'tar' or 'zip', got {archive_format!r}")
    if "tar" in formats and tarfile.is_tarfile(path):
        with tarfile.open(path) as t:
            t.extractall(to, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(to)
        return True
    if "zip" in formats and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            z.extractall(to)
        return True
    return False


def get_file(fname=None, origin=None, untar=False, md5_hash=None, file_hash=None, cache_subdir="datasets",
             hash_algorithm="auto", extract=False, archive_format="auto", cache_dir=None):
    """The path of fname in Keras's cache folder, checked against file_hash/md5_hash when given,
    extracted there with extract=True (untar=True: the folder fname names). No downloads: a file
    not there raises FileNotFoundError naming origin and the path."""
    if fname is None:
        if not origin:
            raise ValueError("get_file: give fname or origin")
        fname = os.path.basename(origin.split("?")[0])
    fname = os.fspath(fname)
    folder = keras_cache_dir(cache_dir, cache_subdir)
    if untar:
        untar_path = os.path.join(folder, fname[:-7] if fname.endswith(".tar.gz") else fname)
        path = untar_path + ".tar.gz"
    else:
        untar_path = None
        path = os.path.join(folder, fname)
    if untar and os.path.exists(untar_path):
        return untar_path
    if not os.path.exists(path):
        where = f"{path} (or its extracted folder at {untar_path})" if untar else path
        raise FileNotFoundError(f"get_file: {fname} is not in Keras's cache folder and Tarantella does not download: "
                                f"fetch {origin or fname} and put it at {where}")
    want = file_hash or md5_hash
    if want:
        algorithm = hash_algorithm if hash_algorithm in ("md5", "sha256") else (
            "sha256" if len(want) == 64 else "md5")
        got = _hash(path, algorithm)
        if got != want:
            raise ValueError(f"get_file: {path} has {algorithm} {got}, expected {want} (a damaged or different "
                             f"file; fetch {origin or fname} again)")
    if untar:
        if not _extract(path, folder, "tar"):
            raise ValueError(f"get_file: {path} is not a tar archive")
        return untar_path
    if extract:
        _extract(path, folder, archive_format)
    return path
