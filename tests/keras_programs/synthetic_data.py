"""Synthetic stand-ins for the downloads of the corpus programs: Keras's own file formats (what
keras.datasets.*.load_data and keras.utils.get_file find in Keras's cache folder), and the local
files a few programs open, with the real shapes, columns and vocabularies but few samples of seeded
random contents. No figure of a program depends on these values being the real ones."""
import io
import json
import os
import pickle
import tarfile
import zipfile

import numpy as np

N_MNIST = (512, 1000)       # train, test (programs plot up to 900 test images)
N_IMDB = (256, 256)
N_REUTERS = 460             # split 80/20 by load_data; every one of the 46 topics occurs
N_CIFAR_BATCH = 10000       # per data_batch_i file (5 of them) and the test batch: Keras's loader
                            # fills arrays of exactly 50000 and 10000 (programs cut them after loading)
N_BOSTON = 120
WORDS = ("the a of to and in is it that was he she for on are with as his they at be this from have or "
         "by one had not but what all were when we there can an your which their said if do will each "
         "about how up out them then many some so these would other into has more her two like him see "
         "time could no make than first been its who now people my made over did down only way find use "
         "may water long little very after words called just where most know").split()


def _rng(seed):
    return np.random.default_rng(seed)


def _sequences(rng, n, vocab, lo, hi):
    seqs = np.empty(n, dtype=object)
    for i in range(n):
        seqs[i] = [int(w) for w in rng.zipf(1.3, rng.integers(lo, hi)) % (vocab - 1) + 1]
    return seqs


def _sentences(rng, n, lo=3, hi=9):
    return [" ".join(rng.choice(WORDS, rng.integers(lo, hi))) for _ in range(n)]


def mnist(path):
    rng = _rng(1)
    ntr, nte = N_MNIST
    np.savez_compressed(path, x_train=rng.integers(0, 256, (ntr, 28, 28), dtype=np.uint8),
                        y_train=(np.arange(ntr) % 10).astype(np.uint8),
                        x_test=rng.integers(0, 256, (nte, 28, 28), dtype=np.uint8),
                        y_test=(np.arange(nte) % 10).astype(np.uint8))


def imdb(path):
    rng = _rng(2)
    ntr, nte = N_IMDB
    np.savez(path, x_train=_sequences(rng, ntr, 10000, 20, 300), y_train=(np.arange(ntr) % 2).astype(np.int64),
             x_test=_sequences(rng, nte, 10000, 20, 300), y_test=(np.arange(nte) % 2).astype(np.int64),
             allow_pickle=True)


def word_index(path, n=10000):
    words = [f"{WORDS[i % len(WORDS)]}{i}" for i in range(n)]
    with open(path, "w") as f:
        json.dump({w: i + 1 for i, w in enumerate(words)}, f)


def reuters(path):
    rng = _rng(3)
    np.savez(path, x=_sequences(rng, N_REUTERS, 10000, 10, 200), y=(np.arange(N_REUTERS) % 46).astype(np.int64),
             allow_pickle=True)


def boston_housing(path):
    rng = _rng(4)
    x = rng.uniform(0, 100, (N_BOSTON, 13))
    np.savez(path, x=x, y=x[:, :3].sum(axis=1) / 10 + rng.normal(0, 1, N_BOSTON))


def cifar10(datasets):
    """cifar-10-batches-py/ (Python pickles of data_batch_1..5 and test_batch), the folder Keras's
    get_file(untar=True) extracts (the archive itself is left out: 180 MB of random bytes)."""
    rng = _rng(5)
    folder = os.path.join(datasets, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        batch = {b"batch_label": name.encode(), b"labels": [int(v) for v in np.arange(N_CIFAR_BATCH) % 10],
                 b"data": rng.integers(0, 256, (N_CIFAR_BATCH, 3072), dtype=np.uint8),
                 b"filenames": [f"{name}_{i}.png".encode() for i in range(N_CIFAR_BATCH)]}
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(batch, f, protocol=2)
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({b"label_names": [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog",
                                      b"horse", b"ship", b"truck"]}, f, protocol=2)


def cifar100(datasets, n_train=512, n_test=128):
    """cifar-100-python/ (the pickles train, test and meta), the folder Keras's get_file(untar=True)
    extracts; Keras's loader takes any number of samples, so few."""
    rng = _rng(11)
    folder = os.path.join(datasets, "cifar-100-python")
    os.makedirs(folder, exist_ok=True)
    for name, n in (("train", n_train), ("test", n_test)):
        batch = {b"filenames": [f"{name}_{i}.png".encode() for i in range(n)], b"batch_label": name.encode(),
                 b"fine_labels": [int(v) for v in np.arange(n) % 100],
                 b"coarse_labels": [int(v) for v in np.arange(n) % 20],
                 b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8)}
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(batch, f, protocol=2)
    with open(os.path.join(folder, "meta"), "wb") as f:
        pickle.dump({b"fine_label_names": [f"class_{i}".encode() for i in range(100)],
                     b"coarse_label_names": [f"group_{i}".encode() for i in range(20)]}, f, protocol=2)


def nietzsche(path):
    rng = _rng(6)
    text = ". ".join(_sentences(rng, 500)) + ".\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def fra_lines(n=300, attribution=True):
    """fra.txt of manythings.org: English, tab, French, and since 2018 a tab and the attribution."""
    rng = _rng(7)
    eng = _sentences(rng, n, 1, 4)
    fra = [" ".join(w[::-1] for w in s.split()) for s in eng]
    tail = "\tCC-BY 2.0 (France) Attribution: tatoeba.org" if attribution else ""
    return "".join(f"{e.capitalize()}.\t{f.capitalize()} !{tail}\n" for e, f in zip(eng, fra))


def babi(path):
    """babi-tasks-v1-2.tar.gz: tasks_1-20_v1-2/{en,en-10k}/qa{1,2}_..._{train,test}.txt."""
    rng = _rng(8)
    people, places, things = ["Mary", "John", "Sandra", "Daniel"], ["bathroom", "hallway", "garden", "office",
                                                                     "kitchen", "bedroom"], ["apple", "football", "milk"]

    def story(two):
        lines, n, where = [], 1, {}
        for _ in range(int(rng.integers(2, 5))):
            p, l = str(rng.choice(people)), str(rng.choice(places))
            lines.append(f"{n} {p} went to the {l}.")
            where[p] = (l, n)
            n += 1
        p = str(rng.choice(list(where)))
        if two:
            t = str(rng.choice(things))
            lines.append(f"{n} {p} got the {t} there.")
            n += 1
            lines.append(f"{n} Where is the {t}?\t{where[p][0]}\t{where[p][1]} {n - 1}")
        else:
            lines.append(f"{n} Where is {p}?\t{where[p][0]}\t{where[p][1]}")
        return "\n".join(lines) + "\n"

    files = {}
    for lang in ("en", "en-10k"):
        for task, two in (("qa1_single-supporting-fact", False), ("qa2_two-supporting-facts", True)):
            for split, n in (("train", 120), ("test", 40)):
                files[f"tasks_1-20_v1-2/{lang}/{task}_{split}.txt"] = "".join(story(two) for _ in range(n))
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


JENA_COLUMNS = ["Date Time", "p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)",
                "VPact (mbar)", "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)", "rho (g/m**3)", "wv (m/s)",
                "max. wv (m/s)", "wd (deg)"]


def jena_csv(rows=8000):
    rng = _rng(9)
    t = np.arange(rows)
    out = [",".join(f'"{c}"' if i == 0 else c for i, c in enumerate(JENA_COLUMNS))]
    base = np.array([990, 8, 282, 3, 75, 13, 9, 4, 6, 9, 1200, 2, 3, 180], dtype=float)
    for i in range(rows):
        v = base * (1 + 0.05 * np.sin(2 * np.pi * t[i] / 144)) + rng.normal(0, 0.5, base.shape)
        day, minute = 1 + (i // 144) % 28, (i % 144) * 10
        out.append(f"{day:02d}.01.2009 {minute // 60:02d}:{minute % 60:02d}:00," + ",".join(f"{x:.2f}" for x in v))
    return "\n".join(out) + "\n"


def jena_zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("jena_climate_2009_2016.csv", jena_csv())


def fra_zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("fra.txt", fra_lines())
        z.writestr("_about.txt", "synthetic stand-in\n")


def write_keras_home(home):
    d = os.path.join(home, ".keras", "datasets")
    os.makedirs(d, exist_ok=True)
    mnist(os.path.join(d, "mnist.npz"))
    imdb(os.path.join(d, "imdb.npz"))
    word_index(os.path.join(d, "imdb_word_index.json"))
    reuters(os.path.join(d, "reuters.npz"))
    word_index(os.path.join(d, "reuters_word_index.json"))
    boston_housing(os.path.join(d, "boston_housing.npz"))
    cifar10(d)
    cifar100(d)
    nietzsche(os.path.join(d, "nietzsche.txt"))
    babi(os.path.join(d, "babi-tasks-v1-2.tar.gz"))
    jena_zip(os.path.join(d, "jena_climate_2009_2016.csv.zip"))
    fra_zip(os.path.join(d, "fra-eng.zip"))
    print(f"data: Keras cache files in {d}")


# ---- local files that programs open by path (programs.py "files": {relative path: kind}) ----

def _ucr(path, n, length=500):
    rng = _rng(10 + n)
    y = np.where(np.arange(n) % 2 == 0, -1, 1)
    t = np.linspace(0, 8 * np.pi, length)
    x = np.sin(t[None, :] * (1.5 + 0.5 * y[:, None])) + rng.normal(0, 0.3, (n, length))
    np.savetxt(path, np.concatenate([y[:, None], x], axis=1), delimiter="\t", fmt="%.5f")


def _nab(path, anomaly):
    rng = _rng(11 + anomaly)
    n = 4032 // 4
    v = 20 + 40 * (np.sin(np.arange(n) * 2 * np.pi / 72) > 0) + rng.normal(0, 2, n)
    if anomaly:
        v[600:620] += 80
    lines = ["timestamp,value"] + [f"2014-04-{1 + i // 288:02d} {(i % 288) * 5 // 60:02d}:{(i % 288) * 5 % 60:02d}:00,"
                                   f"{v[i]:.6f}" for i in range(n)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _creditcard(path, n=2000):
    rng = _rng(12)
    cols = ['"Time"'] + [f'"V{i}"' for i in range(1, 29)] + ['"Amount"', '"Class"']
    lines = [",".join(cols)]
    for i in range(n):
        fraud = int(i % 100 == 7)
        v = rng.normal(fraud * 2.0, 1, 28)
        lines.append(f"{i}," + ",".join(f"{x:.6f}" for x in v) + f",{rng.uniform(0, 200):.2f},\"{fraud}\"")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


LOCAL = {
    "fra.txt": lambda p: open(p, "w", encoding="utf-8").write(fra_lines()),
    "fra.txt-2017": lambda p: open(p, "w", encoding="utf-8").write(fra_lines(attribution=False)),
    "forda_train": lambda p: _ucr(p, 160),
    "forda_test": lambda p: _ucr(p, 64),
    "nab_small_noise": lambda p: _nab(p, 0),
    "nab_jumpsup": lambda p: _nab(p, 1),
    "creditcard": _creditcard,
    "jena_csv": lambda p: open(p, "w").write(jena_csv()),
    "keep": lambda p: open(p, "w").close(),
}


# ---- the held-out group's local files (programs.py "ho_*"): each the format the script reads ----

def _ticks(path, n=600):
    """tick_data.csv: timestamp,price (a random walk of one currency pair's ticks)."""
    rng = _rng(21)
    price = 0.894 + np.cumsum(rng.normal(0, 2e-5, n))
    with open(path, "w") as f:
        f.write("timestamp,price\n" + "".join(f"{1746856304.343 + 0.5 * i:.3f},{v:.5f}\n" for i, v in enumerate(price)))


def _mario_level(path, rows=160, width=14):
    """level.txt: a tile map, one column of the level per line, mostly sky ('.'), ground ('=') below."""
    rng = _rng(22)
    tiles = np.array(list("-IpbkgA?_<>|"))
    lines = []
    for _ in range(rows):
        col = ["="] * 2 + ["."] * (width - 2)
        for j in range(2, width):
            if rng.random() < 0.08:
                col[j] = str(rng.choice(tiles))
        lines.append("".join(col))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _ge_prices(path):
    """GE.csv of Yahoo Finance as the script's repository keeps it: date,open,close on business days of
    2003 and early 2004 (the script splits at 2003-12-31)."""
    rng = _rng(23)
    days = [d for d in np.arange(np.datetime64("2003-01-02"), np.datetime64("2004-03-31"))
            if np.is_busday(d)]
    close = 25 + np.cumsum(rng.normal(0, 0.3, len(days)))
    close[-30:-20] += 6  # a jump in the test months: the script plots the anomalies it finds there
    with open(path, "w") as f:
        f.write("date,open,close\n" + "".join(f"{d},{c + rng.normal(0, 0.2):.2f},{c:.2f}\n"
                                                 for d, c in zip(days, close)))


def _hit_songs(path, n=400):
    """dataset-of-10s.csv (Spotify hit predictor): 3 text columns, 15 audio features, target 0/1."""
    rng = _rng(24)
    cols = ("track,artist,uri,danceability,energy,key,loudness,mode,speechiness,acousticness,instrumentalness,"
            "liveness,valence,tempo,duration_ms,time_signature,chorus_hit,sections,target")
    out = [cols]
    for i in range(n):
        hit = i % 2
        v = [rng.uniform(0, 1) * 0.6 + 0.3 * hit, rng.uniform(0, 1), int(rng.integers(0, 12)),
             rng.uniform(-20, -2) + 4 * hit, int(rng.integers(0, 2)), rng.uniform(0, 0.3), rng.uniform(0, 1),
             rng.uniform(0, 1) * (1 - hit), rng.uniform(0, 0.5), rng.uniform(0, 1), rng.uniform(60, 200),
             int(rng.integers(120000, 300000)), int(rng.choice([3, 4])), rng.uniform(20, 60),
             int(rng.integers(5, 15))]
        out.append(f"Track {i},Artist {i % 37},spotify:track:{i:022d}," + ",".join(
            f"{x:.4f}" if isinstance(x, float) else str(x) for x in v) + f",{hit}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def _ohlc(rng, n, header):
    close = 1.068 + np.cumsum(rng.normal(0, 5e-4, n))
    rows = [header]
    for c in close:
        o = c + rng.normal(0, 3e-4)
        rows.append(f"{o:.5f},{max(o, c) + 2e-4:.5f},{min(o, c) - 2e-4:.5f},{c:.5f},{int(rng.integers(1000, 9000))}")
    return "\n".join(rows) + "\n"


def _ohlc_sequences(path, n_seq=20):
    """not_wyckoff_data.csv: MetaTrader's OHLC export, 37 rows per pattern."""
    with open(path, "w") as f:
        f.write(_ohlc(_rng(25), 37 * n_seq, "<OPEN>,<HIGH>,<LOW>,<CLOSE>,<TICKVOL>"))


def _wyckoff_padded(path, n_seq=24):
    """padded_sequences_augmented_final_data.csv: normalized patterns, 37 rows each, columns 0..4."""
    rng = _rng(26)
    x = np.clip(np.linspace(0, 1, 37)[None, :, None] * rng.uniform(0.5, 1, (n_seq, 1, 5))
                + rng.normal(0, 0.05, (n_seq, 37, 5)), 0, 1).reshape(-1, 5)
    with open(path, "w") as f:
        f.write("0,1,2,3,4\n" + "".join(",".join(f"{v:.9f}" for v in row) + "\n" for row in x))


def _sentences_pair(path, lang, n=300):
    """en.csv / fr.csv: one sentence a line, no header, line i of one the translation of line i of the other."""
    rng = _rng(27)
    eng = [s.capitalize() + rng.choice([" .", " !", " ?"]) for s in _sentences(rng, n, 3, 9)]
    text = eng if lang == "en" else [" ".join(w[::-1] for w in s.split()) for s in eng]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")


def _energy(path, n, seed):
    """train/test_energy_data.csv (Kaggle energy consumption): two text columns among five numeric ones."""
    rng = _rng(seed)
    rows = ["Building Type,Square Footage,Number of Occupants,Appliances Used,Average Temperature,Day of Week,"
            "Energy Consumption"]
    for _ in range(n):
        b, sq, occ, app = int(rng.integers(0, 3)), int(rng.integers(500, 50000)), int(rng.integers(1, 100)), \
            int(rng.integers(1, 50))
        temp, day = rng.uniform(10, 35), int(rng.integers(0, 2))
        energy = 2000 + 0.05 * sq + 10 * occ + 20 * app - 5 * temp + 500 * b - 50 * day + rng.normal(0, 50)
        rows.append(f"{['Residential', 'Commercial', 'Industrial'][b]},{sq},{occ},{app},{temp:.2f},"
                    f"{['Weekday', 'Weekend'][day]},{energy:.2f}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _disaster_images(folder, per_class=7):
    """A folder of JPEG images, one subfolder per class as flow_from_directory reads them (7 each:
    the script's validation_split of 0.15 then keeps one of each class for validation)."""
    from PIL import Image
    rng = _rng(30)
    classes = ["biological and chemical pandemic", "cyclone", "drought", "earthquake", "flood", "landslide",
               "tsunami", "wildfire"]
    for c, name in enumerate(classes):
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        for i in range(per_class):
            img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            img[..., c % 3] //= 2  # a class-dependent colour cast
            Image.fromarray(img).save(os.path.join(folder, name, f"{name[:4]}_{i}.jpg"), quality=90)


def _titanic(path, n=200):
    """Kaggle's Titanic train.csv: quoted names with commas, missing Age, Cabin and Embarked values."""
    rng = _rng(31)
    rows = ["PassengerId,Survived,Pclass,Name,Sex,Age,SibSp,Parch,Ticket,Fare,Cabin,Embarked"]
    for i in range(n):
        sex = "female" if rng.random() < 0.35 else "male"
        pclass = int(rng.choice([1, 2, 3], p=[0.25, 0.2, 0.55]))
        survived = int(rng.random() < (0.75 if sex == "female" else 0.2) + 0.1 * (pclass == 1))
        age = "" if rng.random() < 0.2 else f"{rng.uniform(1, 70):.0f}"
        cabin = f"C{int(rng.integers(1, 150))}" if pclass == 1 and rng.random() < 0.7 else ""
        emb = "" if rng.random() < 0.01 else str(rng.choice(["S", "C", "Q"], p=[0.72, 0.19, 0.09]))
        rows.append(f'{i + 1},{survived},{pclass},"Person{i}, {"Mrs." if sex == "female" else "Mr."} Someone",{sex},'
                    f'{age},{int(rng.integers(0, 3))},{int(rng.integers(0, 3))},A/5 {21171 + i},'
                    f'{rng.uniform(5, 100 if pclass > 1 else 300):.4f},{cabin},{emb}')
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _crop_yield(path, n=400):
    """Kaggle's Indian crop yield table: crop, year, season (padded with spaces, as the real file),
    state, and five measured columns; yield = production / area."""
    rng = _rng(32)
    crops = ["Arecanut", "Arhar/Tur", "Castor seed", "Rice", "Wheat", "Maize"]
    seasons = ["Whole Year ", "Kharif     ", "Rabi       ", "Summer     "]
    states = ["Assam", "Karnataka", "Punjab", "Kerala"]
    rows = ["Crop,Crop_Year,Season,State,Area,Production,Annual_Rainfall,Fertilizer,Pesticide,Yield"]
    for _ in range(n):
        area = int(rng.integers(50, 80000))
        yld = rng.uniform(0.2, 3.0)
        rows.append(f"{rng.choice(crops)},{int(rng.integers(1997, 2021))},{rng.choice(seasons)},{rng.choice(states)},"
                    f"{area},{int(area * yld)},{rng.uniform(500, 3000):.1f},{area * rng.uniform(80, 120):.2f},"
                    f"{area * rng.uniform(0.2, 0.4):.2f},{yld:.9f}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _pima(path, n=200):
    """pima-indians-diabetes.data: 8 clinical measurements and the 0/1 outcome, comma separated, no header."""
    rng = _rng(33)
    out = []
    for _ in range(n):
        y = int(rng.random() < 0.35)
        v = [int(rng.integers(0, 12)), int(rng.normal(110 + 30 * y, 25)), int(rng.normal(70, 12)),
             int(rng.integers(0, 50)), int(rng.integers(0, 300)), round(float(rng.normal(31 + 4 * y, 6)), 1),
             round(float(rng.uniform(0.08, 2.0)), 3), int(rng.integers(21, 75))]
        out.append(",".join(str(x) for x in v) + f",{y}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def _aclimdb_tar(path, per_class=40):
    """aclImdb_v1.tar.gz (Stanford's IMDB reviews): aclImdb/{train,test}/{pos,neg}/<id>_<stars>.txt
    and train/unsup, reviews with <br /> tags and punctuation as the real ones have."""
    rng = _rng(34)
    files = {}
    for split in ("train", "test"):
        for label, words in (("pos", ["good", "great", "fine"]), ("neg", ["bad", "awful", "dull"])):
            for i in range(per_class):
                text = " ".join(_sentences(rng, 3, 4, 12)) + f", {rng.choice(words)}!<br /><br />The end."
                files[f"aclImdb/{split}/{label}/{i}_{int(rng.integers(1, 11))}.txt"] = text
    for i in range(5):
        files[f"aclImdb/train/unsup/{i}_0.txt"] = " ".join(_sentences(rng, 2))
    files["aclImdb/README"] = "synthetic stand-in"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _churn(path, n=300):
    """Churn_Modelling.csv (Kaggle's bank churn): ids, surname, 10 features with Geography and Gender
    as text, Exited 0/1."""
    rng = _rng(35)
    rows = ["RowNumber,CustomerId,Surname,CreditScore,Geography,Gender,Age,Tenure,Balance,NumOfProducts,HasCrCard,"
            "IsActiveMember,EstimatedSalary,Exited"]
    for i in range(n):
        age = int(rng.integers(18, 80))
        exited = int(rng.random() < 0.1 + 0.3 * (age > 50))
        rows.append(f"{i + 1},{15600000 + i},Name{i},{int(rng.integers(350, 850))},"
                    f"{rng.choice(['France', 'Spain', 'Germany'])},{rng.choice(['Female', 'Male'])},{age},"
                    f"{int(rng.integers(0, 11))},{rng.uniform(0, 200000):.2f},{int(rng.integers(1, 5))},"
                    f"{int(rng.integers(0, 2))},{int(rng.integers(0, 2))},{rng.uniform(10, 200000):.2f},{exited}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _intents(path, tags=6, per_tag=10):
    """An intents JSON file as chatbot tutorials have it: {"intents": [{"tag", "patterns", "responses"}]}."""
    rng = _rng(36)
    intents = []
    for t in range(tags):
        own = [WORDS[(t * 7 + j) % len(WORDS)] for j in range(5)]
        pats = [" ".join(rng.choice(own + WORDS[:10], int(rng.integers(2, 6)))) for _ in range(per_tag)]
        intents.append({"tag": f"tag{t}", "patterns": pats, "responses": [f"answer {t}"]})
    with open(path, "w") as f:
        json.dump({"intents": intents}, f, indent=2)


def _katakana(path, n=240):
    """joined_titles.csv: an English name (some of two words), a comma, its katakana spelling (no header)."""
    rng = _rng(37)
    kana = [chr(c) for c in range(0x30A2, 0x30F3, 2)]
    rows = []
    for _ in range(n):
        word = "".join(rng.choice(list("abcdefghijklmnoprstuvy"), int(rng.integers(3, 9))))
        if rng.random() < 0.2:  # names of two words, as the real titles have
            word += " " + "".join(rng.choice(list("abcdefghijklmnoprstuvy"), int(rng.integers(2, 6))))
        rows.append(f"{word},{''.join(rng.choice(kana, max(2, len(word) - 1)))}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


def _bank_series(path, n=260):
    """data.csv of a bank's daily balance: REPORTDATE;VALUE, dates dd.mm.yyyy."""
    rng = _rng(38)
    day0 = np.datetime64("2013-12-30")
    v = 3.4e9 + np.cumsum(rng.normal(0, 2e7, n))
    rows = ["REPORTDATE;VALUE"]
    for i in range(n):
        y, m, d = str(day0 + i).split("-")
        rows.append(f"{d}.{m}.{y};{int(v[i])}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _ohlcv_days(rng, first, last, start_price):
    days = [d for d in np.arange(np.datetime64(first), np.datetime64(last)) if np.is_busday(d)]
    close = start_price * np.exp(np.cumsum(rng.normal(0, 0.01, len(days))))
    return days, close


def _amazon(path):
    """Amazon_Stock_Price.csv as Yahoo's download saved by pandas: an unnamed index column, Date, OHLC,
    Volume."""
    rng = _rng(39)
    days, close = _ohlcv_days(rng, "2000-01-03", "2002-06-01", 4.0)
    rows = [",Date,Open,High,Low,Close,Volume"]
    for i, (d, c) in enumerate(zip(days, close)):
        o = c * (1 + rng.normal(0, 0.005))
        rows.append(f"{i},{d},{o:.9f},{max(o, c) * 1.01:.9f},{min(o, c) * 0.99:.9f},{c:.9f},{int(rng.integers(1e8, 4e8))}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _accenture(path):
    """data/accenture.csv (Yahoo via yfinance): Date,Open,High,Low,Close,Volume,Dividends,Stock Splits on
    business days to the end of September 2021 (the notebook windows up to 2021-09-29)."""
    rng = _rng(40)
    days, close = _ohlcv_days(rng, "2019-06-03", "2021-10-02", 180.0)
    rows = ["Date,Open,High,Low,Close,Volume,Dividends,Stock Splits"]
    for d, c in zip(days, close):
        o = c * (1 + rng.normal(0, 0.005))
        rows.append(f"{d},{o},{max(o, c) * 1.01},{min(o, c) * 0.99},{c},{int(rng.integers(1e6, 5e6))},0.0,0")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


_HOUSE_COLUMNS = ("sale_yr,sale_month,sale_day,bedrooms,bathrooms,sqft_living,sqft_lot,floors,waterfront,view,"
                  "condition,grade,sqft_above,sqft_basement,yr_built,yr_renovated,zipcode,lat,long,sqft_living15,"
                  "sqft_lot15")


def _house(path, n, seed, price=True):
    """King County house sales as the course's train/valid/test-v3.csv: id, price (not in test), 21 features."""
    rng = _rng(seed)
    rows = ["id," + ("price," if price else "") + _HOUSE_COLUMNS]
    for i in range(n):
        living = int(rng.integers(500, 5000))
        f = [int(rng.choice([2014, 2015])), int(rng.integers(1, 13)), int(rng.integers(1, 29)), int(rng.integers(1, 7)),
             f"{rng.choice([1.0, 1.5, 2.0, 2.5, 3.0]):.6f}", living, int(rng.integers(1000, 20000)), 1, 0, 0, 3,
             int(rng.integers(5, 12)), living, 0, int(rng.integers(1900, 2015)), 0, int(rng.integers(98001, 98199)),
             f"{rng.uniform(47.2, 47.8):.6f}", f"{rng.uniform(-122.5, -121.3):.6f}", living, int(rng.integers(1000, 20000))]
        head = f"{5615100330 + i}," + (f"{int(100 * living + rng.normal(0, 5e4))}," if price else "")
        rows.append(head + ",".join(str(v) for v in f))
    with open(path, "w") as fh:
        fh.write("\n".join(rows) + "\n")


def _flow_xlsx(path, n=300):
    """Data.xlsx: points x, y of a plane and the velocity U, V of a flow there (a vortex), one sheet."""
    import pandas as pd
    rng = _rng(41)
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    pd.DataFrame({"x": x, "y": y, "U": -y / (0.1 + x * x + y * y), "V": x / (0.1 + x * x + y * y)}).to_excel(
        path, index=False)


def _admission(path, n=300):
    """Admission_Predict_Ver1.1.csv (Kaggle): serial number, 7 scores, the chance of admission."""
    rng = _rng(42)
    rows = ["Serial No.,GRE Score,TOEFL Score,University Rating,SOP,LOR ,CGPA,Research,Chance of Admit "]
    for i in range(n):
        gre, toefl, cgpa = int(rng.integers(290, 341)), int(rng.integers(92, 121)), rng.uniform(6.8, 9.9)
        chance = min(0.97, max(0.34, 0.2 + (cgpa - 6.8) / 4 + (gre - 290) / 400))
        rows.append(f"{i + 1},{gre},{toefl},{int(rng.integers(1, 6))},{rng.choice([1.0, 2.5, 3.5, 4.5])},"
                    f"{rng.choice([1.5, 3.0, 4.0, 5.0])},{cgpa:.2f},{int(rng.integers(0, 2))},{chance:.2f}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def _bitcoin(path):
    """FBTC-USD (Yahoo prices with blockchain figures): Date m/d/yyyy, OHLC, volume, transactions, market cap,
    hash rate, difficulty, average block size."""
    rng = _rng(43)
    days = np.arange(np.datetime64("2017-03-01"), np.datetime64("2018-09-01"))
    close = 1200 * np.exp(np.cumsum(rng.normal(0, 0.03, len(days))))
    rows = ["Date,Close,High,Low,Open,Volume,n-transactions,MKTCP,HRATE,DIFF,AVBLS"]
    for d, c in zip(days, close):
        y, m, dd = str(d).split("-")
        o = c * (1 + rng.normal(0, 0.01))
        rows.append(f"{int(m)}/{int(dd)}/{y},{c:.6f},{max(o, c) * 1.02:.6f},{min(o, c) * 0.98:.6f},{o:.6f},"
                    f"{int(rng.integers(2e8, 4e9))},{int(rng.integers(2e5, 4e5))},{int(c * 1.6e7)},"
                    f"{rng.uniform(3e6, 5e7):.3f},{rng.uniform(4e11, 7e12):.2E},{rng.uniform(0.8, 1.0):.9f}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


LOCAL.update({
    "ticks": _ticks,
    "mario_level": _mario_level,
    "ge_prices": _ge_prices,
    "hit_songs": _hit_songs,
    "ohlc_sequences": _ohlc_sequences,
    "wyckoff_padded": _wyckoff_padded,
    "sentences_en": lambda p: _sentences_pair(p, "en"),
    "sentences_fr": lambda p: _sentences_pair(p, "fr"),
    "energy_train": lambda p: _energy(p, 200, 28),
    "energy_test": lambda p: _energy(p, 100, 29),
    "disaster_images": _disaster_images,
    "titanic": _titanic,
    "crop_yield": _crop_yield,
    "pima": _pima,
    "aclimdb_tar": _aclimdb_tar,
    "churn": _churn,
    "intents": _intents,
    "katakana": _katakana,
    "bank_series": _bank_series,
    "amazon": _amazon,
    "accenture": _accenture,
    "house_train": lambda p: _house(p, 300, 42),
    "house_valid": lambda p: _house(p, 80, 43),
    "house_test": lambda p: _house(p, 80, 44, price=False),
    "flow_xlsx": _flow_xlsx,
    "admission": _admission,
    "bitcoin": _bitcoin,
})


def write_local(kind, path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    LOCAL[kind](path)
