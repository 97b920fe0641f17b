/* save_check.h: checks made before a save, and before training where a save follows it
 * (save_check.c). */
#ifndef TNT_SAVE_CHECK_H
#define TNT_SAVE_CHECK_H

#include "model/model.h"

/* Every layer name of m can be saved in a Keras file (HDF5 group names: not empty, not ".",
 * no '/'); the error names the first that cannot, who and path. */
tnt_status tnt__check_save_names(const tnt_model *m, const char *who, const char *path);
/* A file can be written at path: its directory takes a new file (a probe), and path is not a
 * directory. make_dir: the directory is made first when missing (mkdir -p). */
tnt_status tnt__check_save_path(const char *path, bool make_dir, const char *who);

#endif
