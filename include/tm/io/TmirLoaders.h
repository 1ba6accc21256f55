//===- TmirLoaders.h - Upgrading older .tmir files --------------*- C++ -*-===//
//
// The reference's loader registries (`register_functional_loader`,
// `register_tensor_method_loader`, `register_opdef_loader`,
// `register_module_loader`): upgrade functions keyed by what they upgrade
// (a function, a tensor method, an op def, a module type, or every graph)
// and by the last file version they apply to. Reading a file of version v
// runs every loader of a key whose `upTo` is >= v, in increasing `upTo`
// order, so upgrades chain from the file's version to the current one.
//
// A TmirLoaders object is a value the caller owns and passes in
// TmirReadOptions; TmirLoaders::builtin() holds tmgraph's own upgrades and
// is never modified.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class InternalGraph;
class Module;

/// One argument of a call as read from a file: its structure (constants and
/// node leaves) and the ids of the nodes at its leaves, in flatten order.
struct TmirArg {
  TreeDef def;
  std::vector<int64_t> nodes;

  static TmirArg constant(Scalar v) { return {TreeDef::constant(std::move(v)), {}}; }
  bool isConstant() const { return def.kind() == TreeDef::Kind::Const; }
};

/// A call read from a file (CallFunction, tensor CallMethod or Apply) before
/// its expr is built. Loaders may change the name (a renamed function), the
/// arguments and the op def attributes.
struct TmirCall {
  /// "tensor.zeros" (function), "__add__" (tensor method, receiver at
  /// args[0]), "Elemwise" (op def).
  std::string name;
  std::vector<TmirArg> args;
  /// Keyword arguments by name (the file's, sorted order is restored when
  /// the expr is built).
  std::vector<std::pair<std::string, TmirArg>> kwargs;
  /// Op def attributes (a dict TreeDef); empty for calls.
  TreeDef attrs;
  /// The version of the file being read.
  int64_t version = 0;
  /// Where the call is written (file:line:col), for loaders' errors.
  Location loc;

  /// The keyword argument `name`, or nullptr.
  TmirArg *kwarg(llvm::StringRef name);
  /// Adds or replaces keyword argument `name`.
  void setKwarg(llvm::StringRef name, TmirArg v);
  /// Removes keyword argument `name`; false when absent.
  bool eraseKwarg(llvm::StringRef name);
  /// Moves the positional arguments from `index` on to keywords named
  /// `names` (one name per argument; extra names are ignored).
  void moveToKeywords(size_t index, llvm::ArrayRef<std::string> names);
};

/// A graph line read from a file, before its graph is built: its name,
/// qualname and the fields the current version does not define (by name,
/// as written: `module_name`, `prefix_name` in version 0). Loaders must
/// consume (erase) every field they understand; any left is an error.
struct TmirGraphHeader {
  std::string name, qualname;
  bool hasQualname = false;
  std::map<std::string, std::string> legacyFields;
  int64_t version = 0;
};

/// What a loader upgrades.
enum class TmirLoaderKind : uint8_t { Function, TensorMethod, OpDef, Module, Graph };

/// Loader registries. Copyable; registration is not thread-safe, reading
/// (the parser's look-ups) is.
class TmirLoaders {
public:
  using CallLoader = std::function<void(TmirCall &)>;
  /// Runs on each module of the type read from the file (a builtin block,
  /// or a module constant), after its attributes are set.
  using ModuleLoader = std::function<void(Module &, int64_t version)>;
  using GraphHeaderLoader = std::function<void(TmirGraphHeader &)>;
  /// Runs on each graph after its body is read.
  using GraphLoader = std::function<void(InternalGraph &, int64_t version)>;

  /// An empty registry (files of older versions load unchanged).
  TmirLoaders() = default;
  /// tmgraph's own upgrades (see docs/tmir-format.md); immutable.
  static const TmirLoaders &builtin();

  /// `upTo`: the last file version the loader applies to. Each throws
  /// tmg::Error when a loader is already registered for the same key and
  /// version (as the reference refuses a duplicate registration).
  void registerFunctionLoader(llvm::StringRef printName, int64_t upTo, CallLoader fn);
  void registerTensorMethodLoader(llvm::StringRef method, int64_t upTo, CallLoader fn);
  void registerOpDefLoader(llvm::StringRef opdef, int64_t upTo, CallLoader fn);
  void registerModuleLoader(llvm::StringRef moduleType, int64_t upTo, ModuleLoader fn);
  void registerGraphLoader(int64_t upTo, GraphHeaderLoader header, GraphLoader body = {});

  /// True when some call loader of `kind` and `name` applies to `version`
  /// (cheap: the parser asks this for every call of an older file).
  bool hasCallLoader(TmirLoaderKind kind, llvm::StringRef name, int64_t version) const;
  /// Runs the applicable call loaders on `c` (kind from the call); they may
  /// rename it, and loaders of the new name run after those of the old.
  void upgradeCall(TmirLoaderKind kind, TmirCall &c) const;
  void upgradeModule(Module &m, int64_t version) const;
  void upgradeGraphHeader(TmirGraphHeader &h) const;
  void upgradeGraph(InternalGraph &g, int64_t version) const;

private:
  template <typename Fn> struct Entry {
    int64_t upTo;
    Fn fn;
  };
  template <typename Fn>
  using Table = std::map<std::string, std::vector<Entry<Fn>>, std::less<>>;
  template <typename Fn>
  static void add(Table<Fn> &t, llvm::StringRef key, int64_t upTo, Fn fn,
                  llvm::StringRef what);
  const Table<CallLoader> &calls(TmirLoaderKind kind) const;

  Table<CallLoader> functions_, methods_, opdefs_;
  Table<ModuleLoader> modules_;
  std::vector<Entry<std::pair<GraphHeaderLoader, GraphLoader>>> graphs_;
};

/// Converts between a call's `((positional...), {kwargs})` TreeDef with its
/// leaf node ids and the per-argument form loaders edit.
TmirCall splitCallArgs(const TreeDef &args, llvm::ArrayRef<int64_t> nodes);
/// Rebuilds the TreeDef (kwargs sorted by name) and the leaf ids.
TreeDef joinCallArgs(const TmirCall &c, std::vector<int64_t> &nodes);

} // namespace tmg
