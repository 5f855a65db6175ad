// protoc-gen-goro — the protoc plugin that writes goro::grpc services and stubs.
//
//   protoc --cpp_out=OUT --plugin=protoc-gen-goro=PATH --goro_out=OUT a/b.proto
//
// For every .proto it is given it writes a/b.goro.grpc.hpp and a/b.goro.grpc.cpp next to
// protoc's own a/b.pb.h. For each service S of package p.q they hold, in namespace p::q:
//
//   class S {
//     static constexpr std::string_view service_name = "p.q.S";
//     class Service : public goro::grpc::Service { ... one virtual per method ... };
//     class Stub { ... one call per method, on a goro::grpc::Channel ... };
//   };
//
// The Service constructor registers each method with add_method and the serve_*
// adapter of its kind (goro/grpc/service.hpp); the default implementations return
// UNIMPLEMENTED. Stub methods call call_unary or open a ClientCall and hand it to
// ClientReader / ClientWriter / ClientReaderWriter (goro/grpc/client.hpp). Methods keep
// their .proto names, and the .proto's comments are copied to them.
//
// A file without services still gets both files (a header that includes its .pb.h and
// declares nothing): goro_grpc_generate (cmake/GoroGrpc.cmake) names its outputs before
// protoc runs, when it cannot know which files have services.
//
// Message types are named as protoc's C++ generator names them: the package's namespace,
// then the message names from the outermost type in, joined by '_' ("::p::q::Outer_Inner"),
// with '_' appended when the joined name is one of the C++ keywords it avoids. Its own helper (ClassName in
// compiler/cpp/helpers.h) is not a public API of protobuf 3.21, hence the copy here.
#include <google/protobuf/compiler/code_generator.h>
#include <google/protobuf/compiler/plugin.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/printer.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

namespace {

namespace pb = google::protobuf;

// The names protoc 3.21's C++ generator appends '_' to when a message's class name is
// one of them (its kKeywordList: C++11's keywords and NULL, not the newer ones).
constexpr std::string_view kCppKeywords[] = {
    "NULL", "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool",
    "break", "case", "catch", "char", "class", "compl", "const", "constexpr", "const_cast",
    "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else",
    "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq",
};

bool is_cpp_keyword(std::string_view name) {
  return std::find(std::begin(kCppKeywords), std::end(kCppKeywords), name) != std::end(kCppKeywords);
}

// "p.q" -> "p::q", as protoc's C++ generator spells the package (it renames no part).
std::string cpp_namespace(const pb::FileDescriptor& file) {
  std::string out;
  for (char c : file.package()) {
    if (c == '.') {
      out += "::";
    } else {
      out += c;
    }
  }
  return out;
}

// The fully qualified C++ class protoc --cpp_out generates for a message.
std::string cpp_class(const pb::Descriptor& message) {
  std::string name = message.name();
  for (const pb::Descriptor* outer = message.containing_type(); outer != nullptr;
       outer = outer->containing_type()) {
    name = outer->name() + "_" + name;
  }
  if (is_cpp_keyword(name)) name += '_';
  std::string ns = cpp_namespace(*message.file());
  return ns.empty() ? "::" + name : "::" + ns + "::" + name;
}

// "a/b.proto" -> "a/b"
std::string strip_proto(const std::string& filename) {
  constexpr std::string_view ext = ".proto";
  if (filename.size() > ext.size() && filename.ends_with(ext)) {
    return filename.substr(0, filename.size() - ext.size());
  }
  return filename;
}

// The comments before an element (and after it on its line), as "// " lines indented by
// indent.
std::string comment_lines(const pb::SourceLocation& where, std::string_view indent) {
  std::string text = where.leading_comments;
  if (!where.trailing_comments.empty()) {
    if (!text.empty() && !text.ends_with('\n')) text += '\n';
    text += where.trailing_comments;
  }
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    out += indent;
    out += line.empty() ? "//" : "//" + std::string(line.front() == ' ' ? "" : " ") + std::string(line);
    // A backslash at the end would splice the next line of code into the comment.
    if (line.ends_with('\\')) out += '.';
    out += '\n';
    start = end + 1;
  }
  return out;
}

template <class Element>
std::string comments_of(const Element& element, std::string_view indent) {
  pb::SourceLocation where;
  if (!element.GetSourceLocation(&where)) return {};
  return comment_lines(where, indent);
}

// The names generated code declares inside class S: a method may not take them.
bool clashes_with_generated(std::string_view method) {
  return method == "Service" || method == "Stub" || method == "service_name";
}

// Kind-dependent parts of one method's generated code.
struct MethodShape {
  const pb::MethodDescriptor* method;
  std::string request;   // "::p::Req"
  std::string response;  // "::p::Resp"
  const char* call_kind;  // "unary", ...
  const char* adapter;    // "serve_unary", ...
};

MethodShape shape_of(const pb::MethodDescriptor& method) {
  MethodShape shape{&method, cpp_class(*method.input_type()), cpp_class(*method.output_type()),
                    "unary", "serve_unary"};
  if (method.client_streaming() && method.server_streaming()) {
    shape.call_kind = "bidi_streaming";
    shape.adapter = "serve_bidi_streaming";
  } else if (method.client_streaming()) {
    shape.call_kind = "client_streaming";
    shape.adapter = "serve_client_streaming";
  } else if (method.server_streaming()) {
    shape.call_kind = "server_streaming";
    shape.adapter = "serve_server_streaming";
  }
  return shape;
}

// The handler's parameters after ServerContext&, without names (declarations) or with
// them (the lambda that forwards to the virtual).
std::string server_parameters(const MethodShape& m, bool named) {
  const pb::MethodDescriptor& method = *m.method;
  auto name = [&](const char* n) { return named ? std::string(" ") + n : std::string(); };
  if (method.client_streaming() && method.server_streaming()) {
    return "::goro::grpc::ServerReaderWriter<" + m.response + ", " + m.request + ">&" +
           name("stream");
  }
  if (method.client_streaming()) {
    return "::goro::grpc::ServerReader<" + m.request + ">&" + name("reader") + ", " +
           m.response + "*" + name("response");
  }
  if (method.server_streaming()) {
    return "const " + m.request + "&" + name("request") + ", ::goro::grpc::ServerWriter<" +
           m.response + ">&" + name("writer");
  }
  return "const " + m.request + "&" + name("request") + ", " + m.response + "*" +
         name("response");
}

std::string server_arguments(const pb::MethodDescriptor& method) {
  if (method.client_streaming() && method.server_streaming()) return "stream";
  if (method.client_streaming()) return "reader, response";
  if (method.server_streaming()) return "request, writer";
  return "request, response";
}

std::string stub_return(const MethodShape& m) {
  const pb::MethodDescriptor& method = *m.method;
  if (method.client_streaming() && method.server_streaming()) {
    return "std::unique_ptr<::goro::grpc::ClientReaderWriter<" + m.request + ", " +
           m.response + ">>";
  }
  if (method.client_streaming()) {
    return "std::unique_ptr<::goro::grpc::ClientWriter<" + m.request + ">>";
  }
  if (method.server_streaming()) {
    return "std::unique_ptr<::goro::grpc::ClientReader<" + m.response + ">>";
  }
  return "::goro::grpc::Status";
}

std::string stub_parameters(const MethodShape& m) {
  const pb::MethodDescriptor& method = *m.method;
  std::string p = "::goro::grpc::ClientContext& context";
  if (method.client_streaming() && method.server_streaming()) return p;
  if (method.client_streaming()) return p + ", " + m.response + "* response";
  if (method.server_streaming()) return p + ", const " + m.request + "& request";
  return p + ", const " + m.request + "& request, " + m.response + "* response";
}

std::string stub_body(const MethodShape& m, const std::string& path) {
  const pb::MethodDescriptor& method = *m.method;
  if (!method.client_streaming() && !method.server_streaming()) {
    return "  return ::goro::grpc::call_unary(*channel_, context, \"" + path +
           "\", request, *response);\n";
  }
  std::string body = "  static constexpr ::goro::grpc::MethodInfo method{\"" + path +
                     "\", ::goro::grpc::CallKind::" + m.call_kind + "};\n" +
                     "  auto call = std::make_unique<::goro::grpc::ClientCall>(*channel_, "
                     "context, method);\n";
  if (method.client_streaming() && method.server_streaming()) {
    return body + "  return std::make_unique<::goro::grpc::ClientReaderWriter<" + m.request +
           ", " + m.response + ">>(std::move(call));\n";
  }
  if (method.client_streaming()) {
    return body + "  return std::make_unique<::goro::grpc::ClientWriter<" + m.request +
           ">>(std::move(call), response);\n";
  }
  // The one request goes with END_STREAM; a failure shows in the reader's finish().
  return body + "  call->write(request, true);\n" +
         "  return std::make_unique<::goro::grpc::ClientReader<" + m.response +
         ">>(std::move(call));\n";
}

class GoroGenerator final : public pb::compiler::CodeGenerator {
 public:
  bool Generate(const pb::FileDescriptor* file, const std::string& parameter,
                pb::compiler::GeneratorContext* context, std::string* error) const override {
    if (!parameter.empty()) {
      *error = "protoc-gen-goro takes no options (got \"" + parameter + "\")";
      return false;
    }
    for (int s = 0; s < file->service_count(); ++s) {
      const pb::ServiceDescriptor& service = *file->service(s);
      if (is_cpp_keyword(service.name()) || service.name() == "Service" ||
          service.name() == "Stub") {
        *error = file->name() + ": service " + service.full_name() +
                 " cannot be the name of the generated class (rename it)";
        return false;
      }
      for (int i = 0; i < service.method_count(); ++i) {
        const std::string& name = service.method(i)->name();
        if (clashes_with_generated(name) || is_cpp_keyword(name) || name == service.name()) {
          *error = file->name() + ": method " + service.full_name() + "." + name +
                   " cannot be a C++ member of the generated class (rename it)";
          return false;
        }
      }
    }
    const std::string base = strip_proto(file->name());
    write(context, base + ".goro.grpc.hpp", header(*file, base));
    write(context, base + ".goro.grpc.cpp", source(*file, base));
    return true;
  }

  std::uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }

 private:
  static void write(pb::compiler::GeneratorContext* context, const std::string& name,
                    const std::string& text) {
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(name));
    pb::io::Printer printer(out.get(), '$');
    printer.PrintRaw(text);
  }

  static std::string preamble(const pb::FileDescriptor& file) {
    return "// Generated by protoc-gen-goro from " + file.name() + ". Do not edit.\n";
  }

  static std::string header(const pb::FileDescriptor& file, const std::string& base) {
    std::string out = preamble(file);
    out += "#pragma once\n\n";
    out += "#include <memory>\n#include <string_view>\n\n";
    out += "#include <goro/grpc/client.hpp>\n#include <goro/grpc/service.hpp>\n\n";
    out += "#include \"" + base + ".pb.h\"\n";
    if (file.service_count() == 0) return out;
    const std::string ns = cpp_namespace(file);
    out += "\n";
    if (!ns.empty()) out += "namespace " + ns + " {\n\n";
    for (int s = 0; s < file.service_count(); ++s) {
      const pb::ServiceDescriptor& service = *file.service(s);
      out += comments_of(service, "");
      out += "class " + service.name() + " {\n public:\n";
      out += "  static constexpr std::string_view service_name = \"" + service.full_name() +
             "\";\n\n";
      out += "  // The server side: derive, override the methods served, and register an\n"
             "  // instance with goro::grpc::Server::register_service. A method not\n"
             "  // overridden answers UNIMPLEMENTED.\n";
      out += "  class Service : public ::goro::grpc::Service {\n   public:\n";
      out += "    Service();\n    ~Service() override;\n";
      for (int i = 0; i < service.method_count(); ++i) {
        MethodShape m = shape_of(*service.method(i));
        out += "\n" + comments_of(*m.method, "    ");
        out += "    virtual ::goro::grpc::Status " + m.method->name() +
               "(::goro::grpc::ServerContext& context, " + server_parameters(m, true) +
               ");\n";
      }
      out += "  };\n\n";
      out += "  // The client side: calls the methods through a channel; each call parks the\n"
             "  // calling goroutine. A Stub is cheap and may be shared by goroutines.\n";
      out += "  class Stub {\n   public:\n";
      out += "    explicit Stub(std::shared_ptr<::goro::grpc::Channel> channel);\n";
      for (int i = 0; i < service.method_count(); ++i) {
        MethodShape m = shape_of(*service.method(i));
        out += "\n" + comments_of(*m.method, "    ");
        out += "    " + stub_return(m) + " " + m.method->name() + "(" + stub_parameters(m) +
               ");\n";
      }
      out += "\n   private:\n    std::shared_ptr<::goro::grpc::Channel> channel_;\n  };\n";
      out += "};\n\n";
    }
    if (!ns.empty()) out += "}  // namespace " + ns + "\n";
    return out;
  }

  static std::string source(const pb::FileDescriptor& file, const std::string& base) {
    std::string out = preamble(file);
    out += "#include \"" + base + ".goro.grpc.hpp\"\n";
    if (file.service_count() == 0) return out;
    out += "\n#include <memory>\n#include <string>\n#include <utility>\n\n";
    const std::string ns = cpp_namespace(file);
    if (!ns.empty()) out += "namespace " + ns + " {\n\n";
    for (int s = 0; s < file.service_count(); ++s) {
      const pb::ServiceDescriptor& service = *file.service(s);
      const std::string cls = service.name();
      out += cls + "::Service::Service() : ::goro::grpc::Service(std::string(service_name)) {\n";
      for (int i = 0; i < service.method_count(); ++i) {
        MethodShape m = shape_of(*service.method(i));
        const std::string& name = m.method->name();
        out += "  add_method(\"" + name + "\", ::goro::grpc::CallKind::" + m.call_kind +
               ",\n             [this](::goro::grpc::ServerCall& call) {\n";
        out += "               return ::goro::grpc::" + std::string(m.adapter) + "<" +
               m.request + ", " + m.response + ">(\n";
        out += "                   call, [this](::goro::grpc::ServerContext& context, " +
               server_parameters(m, true) + ") {\n";
        out += "                     return " + name + "(context, " +
               server_arguments(*m.method) + ");\n";
        out += "                   });\n             });\n";
      }
      out += "}\n\n";
      out += cls + "::Service::~Service() = default;\n";
      for (int i = 0; i < service.method_count(); ++i) {
        MethodShape m = shape_of(*service.method(i));
        out += "\n::goro::grpc::Status " + cls + "::Service::" + m.method->name() +
               "(::goro::grpc::ServerContext&, " + server_parameters(m, false) + ") {\n";
        out += "  return {::goro::grpc::StatusCode::unimplemented, \"" + m.method->full_name() +
               " is not implemented\"};\n}\n";
      }
      out += "\n" + cls + "::Stub::Stub(std::shared_ptr<::goro::grpc::Channel> channel)\n"
             "    : channel_(std::move(channel)) {}\n";
      for (int i = 0; i < service.method_count(); ++i) {
        MethodShape m = shape_of(*service.method(i));
        const std::string path = "/" + service.full_name() + "/" + m.method->name();
        out += "\n" + stub_return(m) + " " + cls + "::Stub::" + m.method->name() + "(" +
               stub_parameters(m) + ") {\n";
        out += stub_body(m, path);
        out += "}\n";
      }
      out += "\n";
    }
    if (!ns.empty()) out += "}  // namespace " + ns + "\n";
    return out;
  }
};

}  // namespace

int main(int argc, char* argv[]) {
  GoroGenerator generator;
  return pb::compiler::PluginMain(argc, argv, &generator);
}
