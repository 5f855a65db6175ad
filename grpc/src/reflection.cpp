// Server reflection (grpc.reflection.v1alpha and v1.ServerReflection): what grpcurl and
// friends ask to learn a server's services. Answers come from the generated descriptor
// pool, which holds every .proto compiled into the program: the registered services',
// and the health and reflection protocols'. The two versions have the same messages
// under two packages, so one template serves both.
#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include "builtin_services.hpp"
#include "grpc/reflection/v1/reflection.pb.h"
#include "grpc/reflection/v1alpha/reflection.pb.h"

namespace goro::grpc::detail {
namespace {

namespace pb = google::protobuf;

// Adds file and, before it, each file it imports (not yet sent), as clients expect to
// build their pool from the answer alone.
template <class Response>
void add_file_with_dependencies(const pb::FileDescriptor* file, std::set<std::string>& seen,
                                Response& out) {
  if (!seen.insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i)
    add_file_with_dependencies(file->dependency(i), seen, out);
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out.add_file_descriptor_proto());
}

template <class Request, class Response>
class ReflectionService final : public Service {
 public:
  ReflectionService(std::string name, const std::vector<std::string>* services)
      : Service(std::move(name)), services_(services) {
    add_method("ServerReflectionInfo", CallKind::bidi_streaming, [this](ServerCall& call) {
      return serve_bidi_streaming<Request, Response>(
          call, [this](ServerContext&, ServerReaderWriter<Response, Request>& stream) {
            Request req;
            while (stream.read(&req)) {
              Response resp;
              answer(req, resp);
              if (!stream.write(resp)) break;
            }
            return Status();
          });
    });
  }

 private:
  void answer(const Request& req, Response& resp) const {
    resp.set_valid_host(req.host());
    *resp.mutable_original_request() = req;
    const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
    const pb::FileDescriptor* file = nullptr;
    switch (req.message_request_case()) {
      case Request::kListServices:
        for (const std::string& name : *services_)
          resp.mutable_list_services_response()->add_service()->set_name(name);
        return;
      case Request::kFileByFilename: file = pool->FindFileByName(req.file_by_filename()); break;
      case Request::kFileContainingSymbol:
        file = pool->FindFileContainingSymbol(req.file_containing_symbol());
        break;
      case Request::kFileContainingExtension: {
        const pb::Descriptor* type =
            pool->FindMessageTypeByName(req.file_containing_extension().containing_type());
        const pb::FieldDescriptor* ext =
            type ? pool->FindExtensionByNumber(type,
                                               req.file_containing_extension().extension_number())
                 : nullptr;
        if (ext) file = ext->file();
        break;
      }
      case Request::kAllExtensionNumbersOfType: {
        const pb::Descriptor* type =
            pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
        if (type) {
          auto* out = resp.mutable_all_extension_numbers_response();
          out->set_base_type_name(type->full_name());
          std::vector<const pb::FieldDescriptor*> exts;
          pool->FindAllExtensions(type, &exts);
          for (const pb::FieldDescriptor* e : exts) out->add_extension_number(e->number());
          return;
        }
        break;
      }
      default:
        resp.mutable_error_response()->set_error_code(
            static_cast<int>(StatusCode::invalid_argument));
        resp.mutable_error_response()->set_error_message("unknown reflection request");
        return;
    }
    if (file == nullptr) {
      resp.mutable_error_response()->set_error_code(static_cast<int>(StatusCode::not_found));
      resp.mutable_error_response()->set_error_message("not found");
      return;
    }
    std::set<std::string> seen;
    add_file_with_dependencies(file, seen, *resp.mutable_file_descriptor_response());
  }

  const std::vector<std::string>* services_;
};

}  // namespace

std::unique_ptr<Service> make_reflection_service(bool v1,
                                                 const std::vector<std::string>* services) {
  if (v1) {
    return std::make_unique<ReflectionService<::grpc::reflection::v1::ServerReflectionRequest,
                                              ::grpc::reflection::v1::ServerReflectionResponse>>(
        "grpc.reflection.v1.ServerReflection", services);
  }
  return std::make_unique<ReflectionService<::grpc::reflection::v1alpha::ServerReflectionRequest,
                                            ::grpc::reflection::v1alpha::ServerReflectionResponse>>(
      "grpc.reflection.v1alpha.ServerReflection", services);
}

}  // namespace goro::grpc::detail
